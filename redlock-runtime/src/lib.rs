//! Correct distributed locks on Redis for tokio.
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
//!     // Renewed every ttl/3 by a watchdog while `guard` lives.
//!     place_order(guard.fencing_token()).await;
//!
//!     guard.release().await?; // or drop it: released from a spawned task
//!     Ok(())
//! }
//! ```
//!
//! # How a lock works
//!
//! - **Acquire** is one round trip: a Lua script runs `SET key token NX PX ttl`
//!   and, when it succeeds, increments the key's fencing counter (kept beside
//!   it under the same `{hash tag}`). The token is a random UUID v4.
//! - **Release** and **extend** are Lua compare-then-act scripts: they act only
//!   while the key still holds this owner's token, so a lock that expired and
//!   passed to someone else is never deleted or extended by its old owner.
//! - **Waiting** is woken by the release itself: releases publish on a
//!   channel named like the key, and one subscriber connection per client
//!   wakes that key's waiter at once. Polling with exponential backoff and
//!   full jitter ([`RetryPolicy`]), each sleep cut to the holder's remaining
//!   lease and to the wait left, stays as the fallback, so a missed message
//!   (or a lease that ran out) never strands a waiter.
//! - **Fair mode** ([`LockRequest::fair`]) serves waiters in arrival order
//!   through a queue kept in Redis; the default is first-come-after-release,
//!   which needs no queue.
//! - **The watchdog**, one task per client, renews every held lock at least
//!   every `ttl / 3`, batching all locks due together into one pipelined
//!   round trip, and never after the lock's release was sent. When a renewal
//!   finds the token gone, or cannot reach Redis before the lease would have
//!   run out, [`LockGuard::lost`] completes and [`LockGuard::is_held`] turns
//!   false.
//! - **Scoped execution** ([`LockRequest::run`], [`LockRequest::try_run`])
//!   runs a future holding the lock, gives it [`current_lock`], stops it when
//!   the lock is lost ([`OnLost`]), and is reentrant per task: a nested scope
//!   on the same key through the same client costs no round trip.
//! - **Scheduler holds** ([`LockRequest::hold_at_least`]) keep other nodes
//!   out for a minimum time measured on Redis's clock.
//! - **Fencing tokens** ([`LockGuard::fencing_token`]) strictly increase with
//!   each acquisition of a key; the counter never expires. Pass the token to
//!   the store you write to, and have it reject lower tokens.
//! - **Dropping** a guard releases the lock from a spawned task; `drop` never
//!   blocks and never panics, even outside a runtime (then the lease runs out).
//!
//! # Keys in Redis
//!
//! A lock named `order:42` with the default prefix lives at `lock:{order:42}`
//! and its fencing counter at `lock:{order:42}:fence`. The fencing counter is
//! kept forever (a few dozen bytes per distinct key) so tokens never go back.
//!
//! # Without Redis
//!
//! [`LockClient::in_memory`] gives the same semantics inside one process: for
//! single-instance services and for your own unit tests.
//!
//! # Logs
//!
//! `tracing` events (target `redlock`) for acquire, wait, renew, lost and
//! release carry the key and fencing token, never the owner token; the Redis
//! URL is only ever shown with its password redacted.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod backoff;
mod channel;
mod client;
mod error;
mod guard;
mod scope;
mod scripts;
mod util;
mod wakeups;
mod watchdog;

pub use backoff::RetryPolicy;
pub use channel::ChannelWatch;
pub use client::{LockClient, LockClientBuilder, LockRequest};
pub use error::{ConfigError, LockError, LostReason, Operation};
pub use guard::{LockGuard, Lost};
pub use scope::{CurrentLock, OnLost, current_lock};
pub use util::MAX_KEY_LEN;

pub use bb8;
pub use bb8_redis;
pub use redis;
