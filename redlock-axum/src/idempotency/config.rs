//! The layer's settings as the service reads them, the header lists, and
//! the default store policy.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderName, Method, StatusCode};

use crate::key::ExtractKey;
use crate::rejection::IdempotencyRejection;
use crate::store::IdempotencyStore;

/// Headers never stored for replay, whatever the allow-list says: they
/// belong to one response (cookies, dates, request and trace ids) or to the
/// connection.
pub const NEVER_REPLAYED: &[&str] = &[
    "set-cookie",
    "set-cookie2",
    "date",
    "x-request-id",
    "request-id",
    "x-correlation-id",
    "x-amzn-requestid",
    "traceparent",
    "tracestate",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "idempotent-replayed",
];

/// The headers stored with a response and replayed by default.
pub const DEFAULT_REPLAY_HEADERS: &[&str] = &[
    "content-encoding",
    "content-range",
    "content-type",
    "content-language",
    "content-disposition",
    "content-location",
    "location",
    "etag",
    "last-modified",
    "link",
    "cache-control",
    "expires",
    "vary",
];

pub(crate) type ScopeFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;
type StatusFn = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;
type RejectionFn = Arc<dyn Fn(IdempotencyRejection) -> Response + Send + Sync>;
/// What a request's fingerprint covers, chosen by the layer's user (see
/// `IdempotencyLayer::fingerprint`).
pub(crate) type FingerprintFn = Arc<dyn Fn(&Parts, &[u8]) -> Vec<u8> + Send + Sync>;

#[derive(Clone)]
pub(crate) enum Scope {
    Global,
    Per(ScopeFn),
}

/// Everything the service needs, shared by its clones.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) store: IdempotencyStore,
    pub(crate) methods: Vec<Method>,
    pub(crate) extract: Arc<dyn ExtractKey>,
    /// For messages: where the key is read from.
    pub(crate) key_source: String,
    pub(crate) scope: Scope,
    pub(crate) required: bool,
    pub(crate) derive: Option<Duration>,
    pub(crate) body_limit: usize,
    pub(crate) store_limit: usize,
    pub(crate) lease: Duration,
    pub(crate) retention: Duration,
    pub(crate) fail_open: bool,
    pub(crate) wait: Option<Duration>,
    /// The most a `409`'s `Retry-After` asks a client to wait.
    pub(crate) retry_hint: Duration,
    pub(crate) mismatch_status: StatusCode,
    /// The client error answered when the scope function finds no scope
    /// (`None`: `500`, the layer's configuration is at fault).
    pub(crate) missing_scope_status: Option<StatusCode>,
    /// What the fingerprint covers (`None`: method, path, query, content
    /// type and body).
    pub(crate) fingerprint: Option<FingerprintFn>,
    pub(crate) store_if: StatusFn,
    pub(crate) replay_headers: Vec<HeaderName>,
    pub(crate) key_prefix: String,
    pub(crate) redis_timeout: Duration,
    pub(crate) map_rejection: Option<RejectionFn>,
}

impl Config {
    /// Whether a response header is stored and replayed: allow-listed, or
    /// one of [`BODY_HEADERS`].
    pub(crate) fn replays(&self, name: &HeaderName) -> bool {
        self.replay_headers.contains(name) || BODY_HEADERS.contains(&name.as_str())
    }

    /// The response for a rejection, through `map_rejection` if set.
    pub(crate) fn reject(&self, rejection: IdempotencyRejection) -> Response {
        crate::metrics::outcome(rejection.metric_label());
        match &self.map_rejection {
            Some(map) => map(rejection),
            None => rejection.into_response(),
        }
    }
}

/// The response headers that describe the stored bytes themselves: always
/// stored and replayed with a body, whatever the replay allow-list says, so
/// a replay never sends gzip bytes without `content-encoding: gzip`.
pub const BODY_HEADERS: &[&str] = &["content-encoding", "content-range"];

/// The default store policy: 2xx and 4xx, but not 401 and 403 (the user may
/// fix their credentials and retry with the same key), 408, 409, 425 or
/// 429 (try again later).
pub fn default_store_policy(status: StatusCode) -> bool {
    (status.is_success() || status.is_client_error())
        && !matches!(status.as_u16(), 401 | 403 | 408 | 409 | 425 | 429)
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("store", &self.store)
            .field("methods", &self.methods)
            .field("key", &self.key_source)
            .field(
                "scope",
                &match self.scope {
                    Scope::Global => "global",
                    Scope::Per(_) => "per request",
                },
            )
            .field("required", &self.required)
            .field("derive", &self.derive)
            .field("body_limit", &self.body_limit)
            .field("store_limit", &self.store_limit)
            .field("lease", &self.lease)
            .field("retention", &self.retention)
            .field("fail_open", &self.fail_open)
            .field("wait_for_result", &self.wait)
            .field("retry_hint", &self.retry_hint)
            .field("mismatch_status", &self.mismatch_status)
            .field("missing_scope_status", &self.missing_scope_status)
            .field("fingerprint", &self.fingerprint.as_ref().map(|_| "custom"))
            .field("replay_headers", &self.replay_headers)
            .field("key_prefix", &self.key_prefix)
            .field("redis_timeout", &self.redis_timeout)
            .finish_non_exhaustive()
    }
}
