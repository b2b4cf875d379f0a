//! The metric the idempotency layer records.
//!
//! With the `metrics` feature (which also turns on `redlock-runtime`'s, see
//! [`redlock_runtime::metrics`]), the layer counts every request it decides
//! on through the [`metrics`](https://docs.rs/metrics) facade:
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `redlock_idempotency_requests_total` | counter | `outcome` |
//!
//! `outcome` is one of:
//!
//! | outcome | what happened | status |
//! |---|---|---|
//! | `claimed` | the key was free: the handler ran | the handler's |
//! | `replayed` | the key had completed: the stored response was replayed | the stored one |
//! | `in_progress` | a request with the key was still running | `409` |
//! | `mismatch` | the key was used before with a different request | `422` (configurable) |
//! | `missing` | no key, and the layer requires one | `400` |
//! | `invalid` | a malformed key | `400` |
//! | `store_error` | Redis could not be reached: `503` when failing closed, the handler ran without idempotency with `fail_open` | `503` or the handler's |
//! | `not_replayable` | the key had completed, but its response was too large to store | `409` |
//! | `body_too_large` | the body exceeded the layer's limit | `413` |
//! | `body_unreadable` | the body could not be read | `400` |
//! | `missing_scope` | the scope function found no scope | `500` |
//! | `no_owner` | the scope function found no scope, answered as the client's error ([`missing_scope_status`](crate::IdempotencyLayer::missing_scope_status)) | the chosen `4xx` |
//!
//! Requests the layer lets through untouched (other methods, no key when
//! keys are optional) are not counted.
//!
//! ```
//! assert_eq!(redlock_axum::metrics::REQUESTS, "redlock_idempotency_requests_total");
//! ```

/// Counter: requests the layer decided on, by `outcome`.
pub const REQUESTS: &str = "redlock_idempotency_requests_total";

/// Gives [`REQUESTS`] its help text in the installed recorder, and the
/// runtime's metrics theirs ([`redlock_runtime::metrics::describe`]).
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub fn describe() {
    redlock_runtime::metrics::describe();
    ::metrics::describe_counter!(
        REQUESTS,
        ::metrics::Unit::Count,
        "Requests the idempotency layer decided on, by outcome."
    );
}

/// Counts one request's outcome.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn outcome(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(REQUESTS, "outcome" => outcome).increment(1);
}
