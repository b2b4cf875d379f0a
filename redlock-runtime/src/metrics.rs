//! The metrics the runtime records, and their labels.
//!
//! With the `metrics` feature the runtime records these through the
//! [`metrics`](https://docs.rs/metrics) facade: install any recorder
//! (`metrics-exporter-prometheus`, `metrics-exporter-statsd`, ...) at
//! startup and they appear; with no recorder they cost an atomic load.
//! Without the feature nothing is recorded and the `metrics` crate is not
//! built. The names are constants here so that tests and dashboards can
//! name them without typos; `describe()` (with the feature) gives each its
//! help text and unit.
//!
//! | name | kind | labels | counts |
//! |---|---|---|---|
//! | `redlock_lock_acquired_total` | counter | `lock`, `backend` | locks taken (a reentrant acquire inside a held scope is not counted) |
//! | `redlock_lock_busy_total` | counter | `lock`, `backend` | acquires with no wait that found the lock held (`try_acquire` → `None`, `Busy`, an `on_busy = "skip"` call skipped) |
//! | `redlock_lock_wait_timeouts_total` | counter | `lock`, `backend` | acquires whose wait ran out with the lock still held |
//! | `redlock_lock_acquire_errors_total` | counter | `lock`, `backend`, `error` | acquires that failed: `error` is `invalid_key`, `config`, `connect`, `connection` (no connection could be made: refused, auth, TLS, ...), `redis`, `timeout`, `redirected` (Redis Cluster still redirecting the call when its time ran out), `pool`, `quorum` or `replicas` |
//! | `redlock_lock_lost_total` | counter | `lock`, `backend`, `reason` | held locks known or presumed lost: `reason` is `ended_by_operator`, `taken_over`, `expired`, `token_gone` or `unconfirmed` ([`LostReason`](crate::LostReason)) |
//! | `redlock_lock_renew_failures_total` | counter | `lock`, `backend` | watchdog renewals that failed (each is retried while the lease lasts) |
//! | `redlock_lock_released_total` | counter | `lock`, `backend`, `how` | locks released while still held: `how` is `release` ([`LockGuard::release`](crate::LockGuard::release), the end of a `run` scope) `drop` (a dropped guard) or `shutdown` ([`LockClient::shutdown`](crate::LockClient::shutdown)) |
//! | `redlock_lock_wait_seconds` | histogram | `lock`, `backend`, `outcome` | time from asking for a lock to the answer: `outcome` is `acquired`, `busy`, `timeout` or `error` |
//! | `redlock_lock_hold_seconds` | histogram | `lock`, `backend` | time from taking a lock to the end of its guard (released, dropped or ended after a loss) |
//!
//! Labels:
//! - `lock`: what [`LockRequest::label`](crate::LockRequest::label) set;
//!   for `#[distributed_lock]`, the key template as written
//!   (`order:<user_id>:<order_id>`); otherwise the key's first
//!   `:`-separated part (`order:42:A-17` → `order`). Never the whole key,
//!   so the number of series stays bounded: give keys without a `:` an
//!   explicit label.
//! - `backend`: `redis` (one Redis, with or without replicas), `redlock`
//!   (a quorum of nodes), `cluster` (Redis Cluster), `sentinel` (a primary
//!   found through Redis Sentinel) or `memory`.
//!
//! `redlock-axum` adds `redlock_idempotency_requests_total` (see its docs).
//!
//! ```
//! # #[cfg(feature = "metrics")]
//! redlock_runtime::metrics::describe();
//! assert_eq!(redlock_runtime::metrics::ACQUIRED, "redlock_lock_acquired_total");
//! ```

/// Counter: locks taken.
pub const ACQUIRED: &str = "redlock_lock_acquired_total";
/// Counter: acquires with no wait that found the lock held.
pub const BUSY: &str = "redlock_lock_busy_total";
/// Counter: acquires whose wait ran out with the lock still held.
pub const WAIT_TIMEOUTS: &str = "redlock_lock_wait_timeouts_total";
/// Counter: acquires that failed (label `error`).
pub const ACQUIRE_ERRORS: &str = "redlock_lock_acquire_errors_total";
/// Counter: held locks known or presumed lost (label `reason`).
pub const LOST: &str = "redlock_lock_lost_total";
/// Counter: watchdog renewals that failed.
pub const RENEW_FAILURES: &str = "redlock_lock_renew_failures_total";
/// Counter: locks released while still held (label `how`).
pub const RELEASED: &str = "redlock_lock_released_total";
/// Histogram (seconds): from asking for a lock to the answer (label `outcome`).
pub const WAIT_SECONDS: &str = "redlock_lock_wait_seconds";
/// Histogram (seconds): from taking a lock to the end of its guard.
pub const HOLD_SECONDS: &str = "redlock_lock_hold_seconds";

/// Gives every metric above its help text and unit in the installed
/// recorder (exporters print them, as Prometheus's `# HELP`). Call it once
/// after installing the recorder; calling it again does no harm.
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub fn describe() {
    use ::metrics::{Unit, describe_counter, describe_histogram};
    describe_counter!(ACQUIRED, Unit::Count, "Locks taken.");
    describe_counter!(
        BUSY,
        Unit::Count,
        "Acquires with no wait that found the lock held by another owner."
    );
    describe_counter!(
        WAIT_TIMEOUTS,
        Unit::Count,
        "Acquires whose wait ran out with the lock still held by another owner."
    );
    describe_counter!(
        ACQUIRE_ERRORS,
        Unit::Count,
        "Acquires that failed (Redis down, timeout, no quorum, bad key...), by error."
    );
    describe_counter!(
        LOST,
        Unit::Count,
        "Held locks known or presumed lost, by reason."
    );
    describe_counter!(
        RENEW_FAILURES,
        Unit::Count,
        "Watchdog renewals that failed (retried while the lease lasts)."
    );
    describe_counter!(
        RELEASED,
        Unit::Count,
        "Locks released while still held, by release() or by a dropped guard."
    );
    describe_histogram!(
        WAIT_SECONDS,
        Unit::Seconds,
        "Time from asking for a lock to the answer, by outcome."
    );
    describe_histogram!(
        HOLD_SECONDS,
        Unit::Seconds,
        "Time from taking a lock to the end of its guard."
    );
}
