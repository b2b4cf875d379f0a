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
//! # The attribute
//!
//! With the default `macros` feature, [`macro@distributed_lock`] turns an
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
//! # Which mode do I need
//!
//! | mode | build it with | survives | does not survive |
//! |---|---|---|---|
//! | one Redis | [`LockClient::connect`] | holder crashes (the lease ends), network blips shorter than the lease, Redis restarts *with* persistence (AOF) | Redis down (no lock can be taken: requests fail with a typed error, never "busy"); a restart *without* persistence while a lock is held (the lock is forgotten) |
//! | a primary with replicas | [`LockClientBuilder::replicas`]`(n, timeout)` | all of the above, and a failover to a replica: every acquire and renewal waits until `n` replicas have it, else the lock is not held | losing the primary and all `n` acknowledging replicas at once; Redis's asynchronous replication is made synchronous only for lock writes |
//! | Redlock, 3 or 5 independent masters | [`LockClient::redlock`] / [`LockClientBuilder::redlock`] | any minority of nodes down, hung (paused) or cut off; a holder cut off from the majority learns it lost the lock (its validity ends) before anyone else can take it | a majority down (requests fail with [`LockError::Quorum`], saying which nodes failed); nodes that restart without persistence, unless [`restart_delay`](LockClientBuilder::restart_delay) is set to the longest ttl |
//!
//! In every mode, a holder that stops for longer than its lease (a GC or VM
//! pause, SIGSTOP) cannot know it lost the lock until it runs again, and
//! may write once more. Only the store it writes to can refuse that write:
//! pass [`LockGuard::fencing_token`] with each write and have the store
//! reject a token lower than the highest it has seen (a conditional
//! `UPDATE .. WHERE fence <= $token`, a compare-and-set).
//!
//! **Fencing under a quorum.** Each node increments its own counter when
//! it grants the lock; the client then raises the counter to the largest
//! value it saw on a majority (a max-assign script), and that value is the
//! token. Any two majorities share a node. The next holder's majority so
//! includes a node whose counter is already at least this token, and
//! increments it: the next token is strictly larger. Counters of a node
//! that restarts without persistence start again from zero; the majority
//! rule still carries the largest value forward as long as one node of
//! every majority kept its data, and the `redlock` tests check tokens
//! across changing majorities and a paused holder.
//!
//! **Restarted nodes.** A node that restarts empty forgets the locks it
//! held: together with one other node it can hand a second owner a
//! majority while the first owner still holds the lock on the rest. The
//! mitigations: run the nodes with persistence (`appendonly yes`,
//! `appendfsync always` to be strict), or delay their return by the
//! longest ttl. [`LockClientBuilder::restart_delay`] does the latter from
//! the client's side: a node whose data is gone (it keeps a marker key)
//! grants nothing until that long after it came back.
//!
//! **Timing.** A Redlock acquire sends to every node at once and returns as
//! soon as a majority granted, so a hung node costs nothing and a slow one
//! at most the per-node timeout ([`LockClientBuilder::node_timeout`],
//! 100 ms, and at most a tenth of the ttl). The lock is held only while its
//! validity lasts: `ttl - time to acquire - (ttl / 100 + 2 ms)` for clock
//! drift between the nodes. [`LockRequest::fair`] is not available with
//! Redlock, and waiters poll instead of being woken by the release.
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
//! # Logs, spans and metrics
//!
//! `tracing` events (target `redlock`) for acquire, wait, renew, lost and
//! release carry the key and fencing token, never the owner token; the Redis
//! URL is only ever shown with its password redacted. They sit in spans:
//!
//! | span | level | fields | lasts |
//! |---|---|---|---|
//! | `redlock.acquire` | debug | `key`, `wait_ms`, `fencing_token` (once taken) | one acquire, waiting included |
//! | `redlock.hold` | info | `key`, `fencing_token` | from the acquire to the end of the lock; [`LockRequest::run`] (and so `#[distributed_lock]`) runs its body in it, [`LockGuard::span`] gives it for the plain API |
//! | `redlock.release` | debug | `key`, `fencing_token` | one release (inside `redlock.hold`) |
//!
//! so every event logged while a lock is held, yours included, says which
//! lock and which token. With the `metrics` feature the runtime also counts
//! acquisitions, busy answers, wait timeouts, errors, losses, failed
//! renewals and releases, and records wait and hold times, through the
//! `metrics` facade: [`metrics`] lists each with its labels.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
mod backoff;
mod channel;
mod client;
mod error;
mod giveback;
mod guard;
mod install;
pub mod metrics;
mod scope;
mod scripts;
mod telemetry;
mod util;
mod wakeups;
mod watchdog;

pub use backoff::RetryPolicy;
pub use channel::ChannelWatch;
pub use client::{LockClient, LockClientBuilder, LockRequest};
pub use error::{ConfigError, LockError, LostReason, NodeFailure, Operation, QuorumDetail};
pub use guard::{LockGuard, Lost};
pub use install::{install, installed};
pub use scope::{CurrentLock, OnLost, current_lock};
pub use util::{MAX_KEY_LEN, redact_url};

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use redlock_macros::distributed_lock;

pub use bb8;
pub use bb8_redis;
pub use redis;

// Not public API: used by the code `#[distributed_lock]` generates.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
