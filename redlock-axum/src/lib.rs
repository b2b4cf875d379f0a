//! Idempotent requests for axum, on Redis: a tower layer that runs a
//! handler at most once per idempotency key, answers `409 Conflict` to a
//! duplicate sent while the first request still runs, and replays the
//! stored response to a retry sent after it completed.
//!
//! It follows the IETF draft "The Idempotency-Key HTTP Header Field"
//! (draft-ietf-httpapi-idempotency-key-header) and what Stripe's idempotent
//! requests do, with the in-flight state kept in Redis so that two
//! concurrent duplicates on two servers never both run.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use axum::{Extension, Json, Router, http::StatusCode, routing::post};
//! use redlock_axum::{IdempotencyContext, IdempotencyLayer};
//! use redlock_runtime::LockClient;
//!
//! /// Put in the request's extensions by your authentication layer.
//! #[derive(Clone)]
//! struct User {
//!     id: u64,
//! }
//!
//! async fn create_order(
//!     Extension(user): Extension<User>,
//!     Extension(idem): Extension<IdempotencyContext>,
//!     Json(order): Json<serde_json::Value>,
//! ) -> (StatusCode, Json<serde_json::Value>) {
//!     // Runs once per key, even when the client sends the request twice.
//!     // Give idem.fencing_token() to the database write.
//!     let created = serde_json::json!({
//!         "user": user.id,
//!         "order": order,
//!         "fence": idem.fencing_token(),
//!     });
//!     (StatusCode::CREATED, Json(created))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let locks = LockClient::connect("redis://127.0.0.1:6379").await?;
//!
//!     // Keys are per user: one user cannot see or block another's.
//!     let idempotency = IdempotencyLayer::scoped(locks, |parts| {
//!         parts.extensions.get::<User>().map(|u| u.id.to_string())
//!     })
//!     .required() // 400 without an Idempotency-Key header
//!     .lease(Duration::from_secs(30)); // a crashed server frees the key within this
//!
//!     let app = Router::new()
//!         .route("/orders", post(create_order))
//!         .layer(idempotency)
//!         // Stands in for your authentication layer: it must run first
//!         // (layers added later run earlier).
//!         .layer(Extension(User { id: 42 }));
//!
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     axum::serve(listener, app).await?;
//!     Ok(())
//! }
//! ```
//!
//! A client then sends:
//!
//! ```text
//! POST /orders HTTP/1.1
//! Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"
//! Content-Type: application/json
//!
//! {"sku": "A-17", "qty": 1}
//! ```
//!
//! and gets `201 Created` from the handler; the same request again gets
//! the same `201` and body from Redis with `Idempotent-Replayed: true`; a
//! duplicate sent while the first runs gets `409 Conflict`, a problem body
//! and `Retry-After`; the same key with another body gets `422`.
//!
//! See [`idempotency`] for the whole behaviour: scopes, fingerprints, the
//! states in Redis, what is stored, and what happens when a client
//! disconnects, a server crashes or Redis is unavailable.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod context;
mod fingerprint;
pub mod idempotency;
mod key;
pub mod metrics;
mod rejection;
mod store;

pub use context::{IdempotencyContext, MissingIdempotencyContext};

/// Log target of the layer's events.
pub(crate) const TARGET: &str = "redlock_axum";

/// The error a service's future fails with, boxed as tower's are.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub use idempotency::config::{
    BODY_HEADERS, DEFAULT_REPLAY_HEADERS, NEVER_REPLAYED, default_store_policy,
};
pub use idempotency::future::ResponseFuture;
pub use idempotency::layer::IdempotencyLayer;
pub use idempotency::service::{IDEMPOTENT_REPLAYED, Idempotency};
pub use key::{ExtractKey, HeaderKey, IDEMPOTENCY_KEY, InvalidKey, MAX_IDEMPOTENCY_KEY_LEN};
pub use rejection::IdempotencyRejection;
pub use store::IdempotencyStore;
