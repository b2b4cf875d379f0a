//! An order service behind the idempotency layer.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p redlock-examples --bin order_service
//! ```
//!
//! Listens on `ADDR` (default `127.0.0.1:3000`); keeps idempotency records
//! in the Redis at `REDIS_URL` (unset: in this process's memory, which
//! protects one instance only). Serves:
//!
//! - `POST /orders` with a JSON body `{"sku": "A-17", "qty": 1}` and an
//!   `Idempotency-Key` header (required): creates the order (taking about
//!   200 ms, so duplicates overlap) and answers `201 Created` with it as JSON
//!   and a `Location`. The same request again gets the same answer,
//!   replayed (`Idempotent-Replayed: true`); a duplicate sent while the
//!   first runs gets `409`; the same key with another body gets `422`.
//!   Orders belong to the user named by the `x-user` header (a stand-in
//!   for authentication; `guest` without it): one user's keys never meet
//!   another's.
//! - `GET /healthz`: `ok`.
//!
//! Try it:
//!
//! ```text
//! curl -i -X POST localhost:3000/orders -H 'Idempotency-Key: "order-1"' \
//!      -H 'content-type: application/json' -d '{"sku":"A-17","qty":1}'
//! ```
//!
//! and send the same command twice at once (`&` between them), or again.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use redlock_axum::{IdempotencyContext, IdempotencyLayer};
use redlock_runtime::LockClient;
use serde_json::{Value, json};

/// The user the request acts for, put in extensions by [`authenticate`].
#[derive(Clone, Debug)]
struct User(String);

/// Stands in for an authentication layer: `x-user` names the user.
async fn authenticate(mut req: Request, next: Next) -> Response {
    let user = req
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .unwrap_or("guest")
        .to_owned();
    req.extensions_mut().insert(User(user));
    next.run(req).await
}

async fn create_order(
    Extension(user): Extension<User>,
    Extension(idem): Extension<IdempotencyContext>,
    Json(order): Json<Value>,
) -> Response {
    let sku = order
        .get("sku")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let qty = order.get("qty").and_then(Value::as_u64).filter(|&q| q > 0);
    let (Some(sku), Some(qty)) = (sku, qty) else {
        // A 4xx is stored too: the same request again gets the same answer.
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(
                json!({"error": "expected {\"sku\": non-empty string, \"qty\": positive integer}"}),
            ),
        )
            .into_response();
    };
    // The work: a database write, a payment... (idem.fencing_token() would
    // go with the write, so a late writer whose lease ran out is refused).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let id = uuid::Uuid::new_v4();
    tracing::info!(user = %user.0, %id, key_hash = idem.key_hash(), fence = idem.fencing_token(), "order created");
    (
        StatusCode::CREATED,
        [(header::LOCATION, format!("/orders/{id}"))],
        Json(json!({
            "id": id.to_string(),
            "user": user.0,
            "sku": sku,
            "qty": qty,
            "status": "created",
        })),
    )
        .into_response()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,redlock_axum=debug".into()),
        )
        .init();
    let addr: SocketAddr = std::env::var("ADDR")
        .unwrap_or_else(|_| "127.0.0.1:3000".to_owned())
        .parse()
        .map_err(|e| format!("ADDR must be host:port: {e}"))?;
    let locks = match std::env::var("REDIS_URL") {
        Ok(url) => LockClient::connect(url).await?,
        Err(_) => {
            tracing::warn!(
                "REDIS_URL is not set: idempotency records are kept in this process only"
            );
            LockClient::in_memory()
        }
    };
    tracing::info!(store = ?locks, "idempotency store");

    let idempotency = IdempotencyLayer::new(locks)
        .scope(|parts| parts.extensions.get::<User>().map(|u| u.0.clone()))
        .required();
    let app = Router::new()
        .route("/orders", post(create_order))
        .layer(idempotency)
        .layer(middleware::from_fn(authenticate))
        .route("/healthz", get(|| async { "ok" }));

    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(
        "order service listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
