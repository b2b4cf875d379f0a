//! Correct distributed locks on Redis for tokio: leases renewed by a
//! watchdog, fencing tokens that only increase, waiters woken by the
//! release, and a lost reply never taken for a lost lock; on one Redis, a
//! primary with replicas, Redlock, Redis Cluster, Sentinel or in memory.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_runtime::{LockClient, LockError};
//!
//! # async fn place_order(_fence: u64) {}
//! #[tokio::main]
//! async fn main() -> Result<(), LockError> {
//!     let locks = LockClient::connect("redis://127.0.0.1:6379").await?;
//!
//!     let guard = locks
//!         .lock("order:42:A-17")
//!         .ttl(Duration::from_secs(15)) // lease if this process dies
//!         .wait(Duration::from_secs(5)) // how long to wait for another holder
//!         .acquire()
//!         .await?;
//!
//!     // Renewed every ttl/3 by a watchdog while `guard` lives. The fencing
//!     // token is issued on first ask (one round trip; `.fenced()` issues
//!     // it with the acquire instead).
//!     place_order(guard.fencing_token().await?).await;
//!
//!     guard.release().await?; // or drop it: released from a spawned task
//!     Ok(())
//! }
//! ```
//!
//! The default [`wait`](LockRequest::wait) is zero: an acquire tries once
//! and answers [`LockError::Busy`] when another owner holds the lock (unlike
//! Redisson, redsync or rslock, which wait); give a wait to queue up.
//!
//! # What's in it
//!
//! - **Locks**: [`LockClient::lock`] makes a [`LockRequest`] (ttl, wait,
//!   [`fenced`](LockRequest::fenced), [`fair`](LockRequest::fair),
//!   [`hold_at_least`](LockRequest::hold_at_least)); its
//!   [`acquire`](LockRequest::acquire) gives a [`LockGuard`] with a
//!   [`fencing_token`](LockGuard::fencing_token) and [`lost`](LockGuard::lost),
//!   its [`run`](LockRequest::run) runs a future holding the lock (reentrant,
//!   with [`current_lock`]).
//! - **The attribute** [`macro@distributed_lock`] (and
//!   [`macro@distributed_semaphore`]), below.
//! - **The synchronizers**: [`RwLock`], [`Semaphore`] of leased [`Permit`]s,
//!   countdown [`Latch`], [`MultiLock`].
//! - **Who holds what**: [`LockClient::inspect`] reads who holds a name and
//!   who waits; [`LockClient::held`] lists what this client holds (for a debug
//!   endpoint); [`LockClient::force_release`] ends a stuck holder's lease
//!   (an operator's break-glass); [`LockClient::ping`] asks every node
//!   (a readiness probe); [`LockClient::shutdown`] releases
//!   everything this client holds when the process stops.
//! - **Run once per key** ([`LockClient::idempotent`]): a message
//!   consumer's or a job's work runs once per key, its result stored and
//!   replayed to duplicates; `#[idempotent]` for an `async fn`.
//! - **Idempotency records** ([`records`]): claim, complete and replay, the
//!   store under run-once calls and `redlock-axum`'s layer.
//! - **Without Redis**: [`LockClient::in_memory`], the same semantics in one
//!   process, for one instance and for your tests.
//! - **Telemetry**: `tracing` spans and events (target `redlock`), and with
//!   the `metrics` feature the counters in [`metrics`].
//!
//! Where each runs:
//!
//! | primitive | one Redis, with or without replicas | Redis Cluster | Sentinel | Redlock | memory |
//! |---|---|---|---|---|---|
//! | [`lock`](LockClient::lock) | yes | yes | yes | yes | yes |
//! | [`rw_lock`](LockClient::rw_lock), [`semaphore`](LockClient::semaphore), [`latch`](LockClient::latch) | yes | yes (one slot each) | yes | refused with [`ConfigError::Unsupported`]: their state lives in one store | yes |
//! | [`multi_lock`](LockClient::multi_lock) | yes | yes (one script per slot's group) | yes | yes, each key by quorum | yes |
//!
//! # The attribute
//!
//! With the default `macros` feature (`mode = "read"`/`"write"` for a
//! read/write lock, `keys = [..]` for a multi-lock, and
//! [`macro@distributed_semaphore`] for a permit of a semaphore), [`macro@distributed_lock`] turns an
//! `async fn` into one whose body runs under [`LockRequest::run`] (or
//! [`try_run`](LockRequest::try_run) with `on_busy = "skip"`), the lock
//! named after its arguments:
//!
//! ```no_run
//! use redlock_runtime::{LockClient, LockError, distributed_lock};
//!
//! #[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s")]
//! async fn place_order(user_id: u64, order_id: &str) -> Result<(), LockError> {
//!     Ok(()) // runs holding `order:42:A-17`
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), LockError> {
//! // Functions without `client = ..` use the installed client.
//! redlock_runtime::install(LockClient::connect("redis://127.0.0.1:6379").await?);
//! place_order(42, "A-17").await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Read next
//!
//! - **The guide**, `docs/guide.md` in the repository: by topic, every
//!   example a complete program (choosing ttl, wait and hold; scheduled
//!   jobs; the watchdog; fencing tokens with a fenced store; the topologies
//!   and what each survives; the synchronizers; who holds a lock and ending a
//!   stuck one; idempotent HTTP requests; connecting and TLS; when Redis is
//!   down; observability).
//! - **[`design`]**: how a lock works and why it is safe, the arguments with
//!   their assumptions and the tests that check them (the lock's life,
//!   topologies, Cluster and Sentinel, fencing tokens, keys in Redis).
//!
//! Cargo features: `macros` (default: the attributes), `tls` (`rediss://`),
//! `metrics`, `test-util` (the `test_util` module's hooks for suites and benchmarks;
//! not for services, not covered by semver).
//!

#![cfg_attr(docsrs, feature(doc_cfg))]

// The modules, from the facade down; each imports only modules below it:
// client -> request -> acquire -> guard -> core -> watchdog -> lock -> backend.
mod acquire;
mod backend;
mod backoff;
mod builder;
mod client;
mod connect_failure;
mod constructors;
mod core;
mod error;
mod force;
mod giveback;
mod guard;
mod held;
mod idempotent;
mod inspect;
mod install;
mod latch;
mod lock;
mod loss;
#[doc = include_str!("../docs/design.md")]
pub mod design {
    // The names the page links to, in scope for its intra-doc links.
    #[allow(unused_imports)]
    use crate::*;
}
pub mod metrics;
mod multi;
mod owner;
mod ping;
mod primitive;
pub mod records;
mod request;
mod rwlock;
mod scope;
#[cfg(test)]
mod script_checks;
mod scripts;
mod semaphore;
mod shutdown;
mod store;
mod target;
mod telemetry;
mod tls;
mod util;
mod watchdog;

pub use backend::{Mode, NodeRole};
pub use backoff::RetryPolicy;
pub use builder::LockClientBuilder;
pub use client::LockClient;
pub use error::{
    ConfigError, ConnectFailure, LockError, LostReason, NodeFailure, Operation, QuorumDetail,
};
pub use force::ForceReleased;
pub use guard::LockGuard;
pub use held::{HeldLease, LeaseKind};
pub use idempotent::{Idempotent, IdempotentError, WorkContext};
pub use inspect::{Holder, LockInfo};
pub use install::{install, installed, require_installed};
pub use latch::Latch;
pub use lock::Lost;
pub use multi::{MultiLock, MultiLockGuard};
pub use ping::NodeStatus;
pub use request::LockRequest;
pub use rwlock::RwLock;
pub use scope::{CurrentLock, OnLost, current_lock};
pub use semaphore::{Permit, Semaphore};
pub use shutdown::Shutdown;
pub use tls::TlsCertificates;
pub use util::{MAX_KEY_LEN, redact_url};

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use redlock_macros::{distributed_lock, distributed_semaphore, idempotent};

/// The `bb8-redis` crate (and through it `bb8` and `redis`) this crate is
/// built on: build a pool for [`LockClientBuilder::pool`] with the very
/// versions it takes.
pub use bb8_redis;

/// The `bb8-redis` pool that [`LockClient::from_pool`] and
/// [`LockClientBuilder::pool`] take (build it with [`bb8_redis`]'s
/// re-exported `bb8`).
pub type RedisPool = bb8_redis::bb8::Pool<bb8_redis::RedisConnectionManager>;

#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod test_util;

// Not public API: used by the code `#[distributed_lock]` generates.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
