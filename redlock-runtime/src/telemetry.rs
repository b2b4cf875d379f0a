//! What the runtime reports: metrics through the `metrics` facade (with the
//! `metrics` feature; without it every function here is empty and inlined
//! away), and the `tracing` spans around acquire, hold and release.

use std::sync::Arc;
use std::time::Duration;

use tracing::Span;

use crate::backend::Mode;
use crate::error::{LockError, LostReason};

/// The labels every lock metric carries.
#[derive(Clone, Debug)]
pub(crate) struct Labels {
    #[cfg(feature = "metrics")]
    lock: Arc<str>,
    #[cfg(feature = "metrics")]
    backend: &'static str,
    /// `false` for what is not a lock (an idempotency record's lease): not
    /// counted in the lock metrics.
    #[cfg(feature = "metrics")]
    counted: bool,
}

/// The `lock` label of a key without an explicit label: its first
/// `:`-separated part (`order:42:A-17` → `order`).
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) fn default_label(key: &str) -> &str {
    key.split(':').next().unwrap_or(key)
}

impl Labels {
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn new(label: Option<&Arc<str>>, key: &str, mode: Mode) -> Self {
        Labels {
            #[cfg(feature = "metrics")]
            lock: match label {
                Some(label) => Arc::clone(label),
                None => Arc::from(default_label(key)),
            },
            #[cfg(feature = "metrics")]
            backend: mode.as_str(),
            #[cfg(feature = "metrics")]
            counted: true,
        }
    }

    /// Labels that count nothing (an idempotency record's lease).
    pub(crate) fn uncounted(mode: Mode) -> Self {
        #[cfg_attr(not(feature = "metrics"), allow(unused_mut))]
        let mut labels = Self::new(None, "", mode);
        #[cfg(feature = "metrics")]
        {
            labels.counted = false;
        }
        labels
    }

    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self::new(None, "test", Mode::Memory)
    }
}

#[cfg(feature = "metrics")]
mod imp {
    use std::time::Duration;

    use ::metrics::{counter, histogram};

    use super::Labels;
    use crate::metrics as names;

    pub(super) fn count(name: &'static str, labels: &Labels) {
        if !labels.counted {
            return;
        }
        counter!(name, "lock" => labels.lock.clone(), "backend" => labels.backend).increment(1);
    }

    pub(super) fn count_with(
        name: &'static str,
        labels: &Labels,
        extra: &'static str,
        value: &'static str,
    ) {
        if !labels.counted {
            return;
        }
        counter!(name, "lock" => labels.lock.clone(), "backend" => labels.backend, extra => value)
            .increment(1);
    }

    pub(super) fn wait(labels: &Labels, outcome: &'static str, waited: Duration) {
        if !labels.counted {
            return;
        }
        histogram!(names::WAIT_SECONDS, "lock" => labels.lock.clone(), "backend" => labels.backend, "outcome" => outcome)
            .record(waited.as_secs_f64());
    }

    pub(super) fn hold(labels: &Labels, held: Duration) {
        if !labels.counted {
            return;
        }
        histogram!(names::HOLD_SECONDS, "lock" => labels.lock.clone(), "backend" => labels.backend)
            .record(held.as_secs_f64());
    }
}

/// When something the metrics time began: a clock read with the `metrics`
/// feature, nothing without it, so that a client without metrics reads no
/// clock for them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Since {
    #[cfg(feature = "metrics")]
    at: std::time::Instant,
}

impl Since {
    pub(crate) fn now() -> Self {
        Self {
            #[cfg(feature = "metrics")]
            at: std::time::Instant::now(),
        }
    }
}

/// How an acquire ended, for the metrics.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) enum AcquireEnd<'a> {
    Acquired,
    Busy { waited: bool },
    Failed(&'a LockError),
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn acquire_ended(labels: &Labels, end: AcquireEnd<'_>, started: Since) {
    #[cfg(feature = "metrics")]
    {
        use crate::metrics as names;
        let outcome = match end {
            AcquireEnd::Acquired => {
                imp::count(names::ACQUIRED, labels);
                "acquired"
            }
            AcquireEnd::Busy { waited: false } => {
                imp::count(names::BUSY, labels);
                "busy"
            }
            AcquireEnd::Busy { waited: true } => {
                imp::count(names::WAIT_TIMEOUTS, labels);
                "timeout"
            }
            AcquireEnd::Failed(error) => {
                imp::count_with(names::ACQUIRE_ERRORS, labels, "error", error_kind(error));
                "error"
            }
        };
        imp::wait(labels, outcome, started.at.elapsed());
    }
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn lost(labels: &Labels, reason: LostReason) {
    #[cfg(feature = "metrics")]
    imp::count_with(
        crate::metrics::LOST,
        labels,
        "reason",
        match reason {
            LostReason::TokenGone => "token_gone",
            LostReason::Unconfirmed => "unconfirmed",
            LostReason::Expired => "expired",
            LostReason::Released => "released",
            LostReason::TakenOver => "taken_over",
            LostReason::EndedByOperator => "ended_by_operator",
            LostReason::ClientShutDown => "client_shut_down",
        },
    );
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn renew_failed(labels: &Labels) {
    #[cfg(feature = "metrics")]
    imp::count(crate::metrics::RENEW_FAILURES, labels);
}

/// How a guard ended.
#[derive(Clone, Copy)]
pub(crate) enum How {
    Release,
    Drop,
    /// By [`LockClient::shutdown`](crate::LockClient::shutdown).
    Shutdown,
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn released(labels: &Labels, how: How) {
    #[cfg(feature = "metrics")]
    imp::count_with(
        crate::metrics::RELEASED,
        labels,
        "how",
        match how {
            How::Release => "release",
            How::Drop => "drop",
            How::Shutdown => "shutdown",
        },
    );
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn held(labels: &Labels, held_for: impl FnOnce() -> Duration) {
    #[cfg(feature = "metrics")]
    imp::hold(labels, held_for());
}

/// The `error` label of `redlock_lock_acquire_errors_total`.
#[cfg(feature = "metrics")]
fn error_kind(error: &LockError) -> &'static str {
    match error {
        LockError::InvalidKey { .. } => "invalid_key",
        LockError::Config(_) => "config",
        LockError::Connect { .. } => "connect",
        LockError::Connection { .. } => "connection",
        LockError::Redis { .. } => "redis",
        LockError::NotPermitted { .. } => "not_permitted",
        LockError::Timeout { .. } => "timeout",
        LockError::Redirected { .. } => "redirected",
        LockError::Pool { .. } => "pool",
        LockError::Quorum { .. } => "quorum",
        LockError::Replicas { .. } => "replicas",
        _ => "other",
    }
}

/// The span around an acquire: `redlock.acquire{key, wait_ms}`, with
/// `fencing_token` recorded when it succeeds.
pub(crate) fn acquire_span(key: &str, wait: Duration) -> Span {
    tracing::debug_span!(
        target: "redlock",
        "redlock.acquire",
        key = %key,
        wait_ms = wait.as_millis() as u64,
        fencing_token = tracing::field::Empty,
    )
}

/// The span of a held lock, from the acquire to the end of the guard:
/// `redlock.hold{key, fencing_token}`. The watchdog's and the release's
/// events are inside it, and [`LockRequest::run`](crate::LockRequest::run)
/// runs its body in it.
pub(crate) fn hold_span(parent: &Span, key: &str, fence: u64) -> Span {
    let span = tracing::info_span!(target: "redlock", parent: parent, "redlock.hold", key = %key, fencing_token = tracing::field::Empty);
    // Recorded when issued: here, or later on first ask.
    if fence > 0 {
        span.record("fencing_token", fence);
    }
    span
}

/// The span around a release, inside the hold span; `fencing_token` only
/// when one was issued.
pub(crate) fn release_span(hold: &Span, key: &str, fence: u64) -> Span {
    tracing::debug_span!(target: "redlock", parent: hold, "redlock.release", key = %key, fencing_token = (fence > 0).then_some(fence))
}
