//! Procedural macros for [`redlock-runtime`](https://docs.rs/redlock-runtime).
//!
//! The `#[distributed_lock]` attribute is not built yet: this crate exports
//! nothing so far, and `redlock-runtime` will re-export the attribute behind
//! its default `macros` feature once it lands. Until then, this is what the
//! attribute will do for you, written by hand with the runtime:
//!
//! ```
//! use std::time::Duration;
//! use redlock_runtime::{LockClient, LockError};
//!
//! // #[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s")]
//! async fn place_order(locks: &LockClient, user_id: u64, order_id: &str) -> Result<u64, LockError> {
//!     let guard = locks
//!         .lock(format!("order:{user_id}:{order_id}"))
//!         .ttl(Duration::from_secs(15))
//!         .wait(Duration::from_secs(5))
//!         .acquire()
//!         .await?;
//!     let fence = guard.fencing_token(); // the body runs holding the lock
//!     guard.release().await?;
//!     Ok(fence)
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let locks = LockClient::in_memory();
//! assert_eq!(place_order(&locks, 42, "A-17").await.unwrap(), 1);
//! # });
//! ```
