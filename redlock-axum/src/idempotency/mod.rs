//! The idempotency layer: one run per idempotency key, `409` for an
//! in-flight duplicate, the stored response for a retry.
//!
//! See the [crate docs](crate) for an example. In detail:
//!
//! # Which requests
//!
//! POST and PATCH ([`methods`](crate::IdempotencyLayer::methods) to change); other
//! methods pass through untouched. The key comes from the
//! `Idempotency-Key` header ([`header`](crate::IdempotencyLayer::header),
//! [`extract_key`](crate::IdempotencyLayer::extract_key)), as an RFC 8941 string
//! (`"..."`) or a bare token: 1 to 255 printable ASCII characters after
//! unquoting, else `400`. A request without a key passes through, is
//! answered `400` with [`required`](crate::IdempotencyLayer::required), or gets a
//! key derived from itself with
//! [`derive_key`](crate::IdempotencyLayer::derive_key).
//!
//! # Whose key
//!
//! The record of a request is found by a hash of its scope (the owner the
//! [`scoped`](crate::IdempotencyLayer::scoped) function names), its method, its
//! matched route and a hash of its key: one user can never read or block
//! another's key. A layer is made with a scope function,
//! [`IdempotencyLayer::scoped`](crate::IdempotencyLayer::scoped), or says
//! there is one scope for every request,
//! [`IdempotencyLayer::global`](crate::IdempotencyLayer::global): there is
//! no layer without a scope decision.
//!
//! # Same key, same request
//!
//! The request's fingerprint is SHA-256 over its method, path, query,
//! content type and body (read up to
//! [`body_limit`](crate::IdempotencyLayer::body_limit), 1 MiB by default, `413`
//! above it), or over what [`fingerprint`](crate::IdempotencyLayer::fingerprint)
//! chooses (say the body less a timestamp field). The same key with another
//! fingerprint is answered `422`
//! ([`mismatch_status`](crate::IdempotencyLayer::mismatch_status)).
//!
//! # States
//!
//! One Redis hash per key (every key of a record shares one `{hash tag}`),
//! each transition one Lua script:
//!
//! | transition | from -> to | checks |
//! |---|---|---|
//! | claim | absent -> in progress (owner token, fencing token, lease) | fingerprint |
//! | renew | in progress -> in progress (lease reset), every lease / 3 | owner |
//! | complete | in progress -> completed (status, allow-listed headers, body) | owner |
//! | release | in progress -> absent | owner |
//!
//! - **In progress**: a duplicate gets `409 Conflict`, a problem body whose
//!   `detail` says "processing", `Retry-After` from
//!   [`retry_hint`](crate::IdempotencyLayer::retry_hint) (1 s, at most the
//!   lease left) and
//!   `Cache-Control: no-store`; or, with
//!   [`wait_for_result`](crate::IdempotencyLayer::wait_for_result), it waits for
//!   the result. The lease (30 s, [`lease`](crate::IdempotencyLayer::lease)) is
//!   renewed while the handler runs, so a crashed server frees the key
//!   within one lease.
//! - **Completed**: a retry gets the stored status, allow-listed headers
//!   ([`DEFAULT_REPLAY_HEADERS`]; never those in [`NEVER_REPLAYED`]) and
//!   body, with `Idempotent-Replayed: true`, for 24 h
//!   ([`retention`](crate::IdempotencyLayer::retention)). The headers that
//!   describe the stored bytes ([`BODY_HEADERS`]: `content-encoding`,
//!   `content-range`) always go with them: a body compressed by a layer
//!   inside this one is replayed with its `content-encoding`.
//! - **What is stored**: 2xx and 4xx responses; for 5xx, 401, 403, 408,
//!   409, 425, 429 and a panicking handler the key is released so that a
//!   retry runs ([`store_if`](crate::IdempotencyLayer::store_if)): a user who fixed
//!   their credentials is not answered with the old 401 for a day. A response larger than
//!   [`store_limit`](crate::IdempotencyLayer::store_limit) is sent to the client
//!   and remembered as completed but not replayable: a retry gets
//!   [`IdempotencyRejection::NotReplayable`], never the handler again and
//!   never a truncated body; so is a response whose body fails midway.
//!   Trailers reach the first client but are not stored.
//!
//! # Failures
//!
//! - The handler runs in a spawned task: a client that disconnects neither
//!   cancels its side effect nor strands its key; the retry gets the result.
//! - Redis unavailable (or slower than
//!   [`redis_timeout`](crate::IdempotencyLayer::redis_timeout)): `503` with
//!   `Retry-After`, the handler does not run; with
//!   [`fail_open`](crate::IdempotencyLayer::fail_open) it runs without protection.
//!   A claim whose answer was lost (it may still be applied, say by a paused
//!   Redis that resumes) is released in the background, so that retries do
//!   not get `409` for a whole lease.
//! - Lease lost while the handler runs (renewals failed for a whole lease,
//!   or the record expired): the response still goes to the client, the
//!   record is not overwritten (every write checks the owner token), and a
//!   warning is logged. Pass [`IdempotencyContext::fencing_token`] to your
//!   database to reject the late writer.
//!
//! # Logs
//!
//! `tracing` events (target `redlock_axum`) carry the key's hash
//! (`key_hash`, as in [`IdempotencyContext::key_hash`]), never the key.
//!
//! # Problem types
//!
//! Every answer of the layer's own is an RFC 9457 problem, listed in
//! [`IdempotencyRejection`].
//!
//! [`IdempotencyContext::fencing_token`]: crate::IdempotencyContext::fencing_token
//! [`DEFAULT_REPLAY_HEADERS`]: crate::DEFAULT_REPLAY_HEADERS
//! [`NEVER_REPLAYED`]: crate::NEVER_REPLAYED
//! [`BODY_HEADERS`]: crate::BODY_HEADERS
//! [`IdempotencyContext::key_hash`]: crate::IdempotencyContext::key_hash
//! [`IdempotencyRejection`]: crate::IdempotencyRejection
//! [`IdempotencyRejection::NotReplayable`]: crate::IdempotencyRejection::NotReplayable

// Their public items are reachable from the crate root only (one path per
// item).
mod body;
pub(crate) mod config;
pub(crate) mod future;
pub(crate) mod layer;
mod lifecycle;
pub(crate) mod service;
