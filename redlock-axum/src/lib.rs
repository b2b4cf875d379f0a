//! Idempotency middleware for axum, built on `redlock-runtime`.
//!
//! The layer (409 for an in-flight duplicate, replay of completed
//! responses) is not built yet: this crate exports nothing so far. Until it
//! lands, an in-flight duplicate can be caught by hand with a lock on the
//! idempotency key:
//!
//! ```
//! use redlock_runtime::{LockClient, LockError};
//!
//! /// `Ok(None)` means "a request with this key is already running: answer 409".
//! async fn claim(locks: &LockClient, idempotency_key: &str) -> Result<Option<u64>, LockError> {
//!     let Some(guard) = locks.lock(format!("idem:{idempotency_key}")).try_acquire().await? else {
//!         return Ok(None);
//!     };
//!     let fence = guard.fencing_token(); // ... run the handler ...
//!     guard.release().await?;
//!     Ok(Some(fence))
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let locks = LockClient::in_memory();
//! assert_eq!(claim(&locks, "3f9c").await.unwrap(), Some(1));
//! # });
//! ```
