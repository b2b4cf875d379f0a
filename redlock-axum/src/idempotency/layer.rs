//! [`IdempotencyLayer`]: the layer and its builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use http::request::Parts;
use http::{HeaderName, Method, StatusCode, header};
use tower_layer::Layer;

use super::config::{Config, DEFAULT_REPLAY_HEADERS, NEVER_REPLAYED, Scope, default_store_policy};
use super::service::Idempotency;
use crate::key::{ExtractKey, HeaderKey, IDEMPOTENCY_KEY, spelled};
use crate::rejection::IdempotencyRejection;
use crate::store::IdempotencyStore;

/// A tower [`Layer`] that makes requests idempotent by key: a handler runs
/// at most once per key (and scope), a duplicate sent while it runs gets
/// `409 Conflict`, and a retry after it completed gets the stored response.
///
/// Made by [`IdempotencyLayer::scoped`] (keys per user or tenant) or
/// [`IdempotencyLayer::global`] (one scope for every request): there is no
/// layer without a scope decision. See the [module docs](crate::idempotency)
/// for the whole behaviour.
#[must_use]
#[derive(Clone)]
pub struct IdempotencyLayer {
    pub(crate) config: Config,
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.config.fmt(f)
    }
}

impl IdempotencyLayer {
    /// Keys are per scope: `scope` names the request's owner (the
    /// authenticated user or tenant, typically read from the extensions an
    /// authentication layer put there), and one owner can never read or
    /// block another's key, even by guessing it. Only a hash of the scope is
    /// stored. Records are kept in `store` (see [`global`](Self::global)
    /// for the defaults).
    ///
    /// `None` answers `500` ([`IdempotencyRejection::MissingScope`]): put
    /// this layer inside your authentication layer, and return a scope of
    /// your own (say `"anonymous"`) for requests that have no owner. When
    /// the scope comes from the client (a tenant header, say), answer its
    /// absence as the client's error with
    /// [`missing_scope_status`](Self::missing_scope_status).
    ///
    /// ```no_run
    /// # async fn demo(locks: redlock_runtime::LockClient) {
    /// #[derive(Clone)]
    /// struct User { id: u64 } // put there by your auth layer
    ///
    /// let layer = redlock_axum::IdempotencyLayer::scoped(locks, |parts| {
    ///     parts.extensions.get::<User>().map(|u| u.id.to_string())
    /// });
    /// # }
    /// ```
    pub fn scoped<F>(store: impl Into<IdempotencyStore>, scope: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        Self::with_scope(store.into(), Scope::Per(Arc::new(scope)))
    }

    /// One scope for every request: any client that knows (or guesses)
    /// another's key can read its result. Only for services whose clients
    /// are one party (a single trusted caller) or whose keys are secrets.
    ///
    /// Records are kept in `store`: a
    /// [`LockClient`](redlock_runtime::LockClient) (on Redis, its pool and
    /// subscriber; an in-memory client keeps records in this process) or a
    /// `bb8-redis` pool.
    ///
    /// Defaults: POST and PATCH, key from the `Idempotency-Key` header and
    /// optional, request bodies up to 1 MiB, responses stored up to 1 MiB,
    /// lease 30 s, completed records kept 24 h, fail closed, no waiting,
    /// `422` on a reused key, records under the `idem:` prefix, Redis
    /// commands bounded by 1 s.
    ///
    pub fn global(store: impl Into<IdempotencyStore>) -> Self {
        Self::with_scope(store.into(), Scope::Global)
    }

    fn with_scope(store: IdempotencyStore, scope: Scope) -> Self {
        Self {
            config: Config {
                store,
                methods: vec![Method::POST, Method::PATCH],
                extract: Arc::new(HeaderKey::default()),
                key_source: spelled(&IDEMPOTENCY_KEY),
                scope,
                required: false,
                derive: None,
                body_limit: 1024 * 1024,
                store_limit: 1024 * 1024,
                lease: Duration::from_secs(30),
                retention: Duration::from_secs(24 * 3600),
                fail_open: false,
                wait: None,
                retry_hint: Duration::from_secs(1),
                mismatch_status: StatusCode::UNPROCESSABLE_ENTITY,
                missing_scope_status: None,
                fingerprint: None,
                store_if: Arc::new(default_store_policy),
                replay_headers: DEFAULT_REPLAY_HEADERS
                    .iter()
                    .map(|h| HeaderName::from_static(h))
                    .collect(),
                key_prefix: "idem:".to_owned(),
                redis_timeout: Duration::from_secs(1),
                map_rejection: None,
            },
        }
    }

    /// The methods the layer applies to; others pass through untouched.
    /// Defaults to POST and PATCH.
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config.methods = methods.into_iter().collect();
        self
    }

    /// Read the key from this header instead of `Idempotency-Key`.
    pub fn header(mut self, name: HeaderName) -> Self {
        self.config.key_source = spelled(&name);
        self.config.extract = Arc::new(HeaderKey::new(name));
        self
    }

    /// Take the key from the request with an [`ExtractKey`] of your own
    /// (the layer still checks it: 1 to 255 printable ASCII characters).
    pub fn extract_key(mut self, extract: impl ExtractKey) -> Self {
        // No header to name: the messages ask for an idempotency key.
        self.config.key_source = String::new();
        self.config.extract = Arc::new(extract);
        self
    }

    /// A request without a key is answered `400`
    /// ([`IdempotencyRejection::MissingKey`]) instead of passing through.
    pub fn required(mut self) -> Self {
        self.config.required = true;
        self
    }

    /// A request without a key gets one derived from itself: its scope,
    /// method, route, and a digest of its path, query, content type and
    /// body. So a plain HTML form posted twice (a double click) runs once;
    /// the second post gets the first's response.
    ///
    /// The same request sent again after `window` runs again: keep it short
    /// (seconds), as two identical orders may be meant. Ignored for
    /// requests that send a key, and when [`required`](Self::required).
    ///
    /// # Panics
    /// If `window` is zero.
    pub fn derive_key(mut self, window: Duration) -> Self {
        assert!(!window.is_zero(), "derive_key: the window must not be zero");
        self.config.derive = Some(window);
        self
    }

    /// The largest request body read (the body is part of the
    /// fingerprint); larger ones get `413`. Defaults to 1 MiB.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.config.body_limit = bytes;
        self
    }

    /// The largest response body stored for replay. A larger response is
    /// sent to the client and remembered as completed but not replayable:
    /// never run again, never replayed truncated (a retry gets
    /// [`IdempotencyRejection::NotReplayable`]). Defaults to 1 MiB.
    pub fn store_limit(mut self, bytes: usize) -> Self {
        self.config.store_limit = bytes;
        self
    }

    /// The lease of a request in progress: renewed every `lease / 3` while
    /// the handler runs, so a crashed server frees the key within one lease.
    /// Defaults to 30 s.
    ///
    /// # Panics
    /// If `lease` is under 30 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        assert!(
            lease >= Duration::from_millis(30),
            "lease: at least 30 ms is needed to renew it in time, got {lease:?}"
        );
        self.config.lease = lease;
        self
    }

    /// How long a completed response is kept for replay. Defaults to 24 h.
    ///
    /// # Panics
    /// If `retention` is zero.
    pub fn retention(mut self, retention: Duration) -> Self {
        assert!(!retention.is_zero(), "retention must not be zero");
        self.config.retention = retention;
        self
    }

    /// When the store (Redis) cannot be reached, let requests through to the
    /// handler without idempotency (logged as a warning) instead of
    /// answering `503` ([`IdempotencyRejection::Unavailable`]), the default.
    pub fn fail_open(mut self) -> Self {
        self.config.fail_open = true;
        self
    }

    /// The `Retry-After` of a `409` for a request still being processed:
    /// the smaller of this hint and what is left of the first request's
    /// lease. The lease (30 s) only bounds a crashed server; a handler
    /// usually answers in far less, so clients are told to come back soon
    /// rather than in 30 s. Set it near your handlers' usual time.
    /// Defaults to 1 s (`Retry-After` counts whole seconds, so at least 1).
    pub fn retry_hint(mut self, hint: Duration) -> Self {
        self.config.retry_hint = hint;
        self
    }

    /// A duplicate sent while the first request runs waits up to `wait`
    /// for its result and replays it, instead of getting `409` at once. It
    /// is woken by a push from Redis when the first completes (with a
    /// `LockClient` built from a URL; others poll), and gets `409` when the
    /// wait ends first. If the first request's key is released (its handler
    /// failed), the waiting duplicate runs the handler itself.
    pub fn wait_for_result(mut self, wait: Duration) -> Self {
        self.config.wait = Some(wait);
        self
    }

    /// The status answered when a key is reused with a different request.
    /// Defaults to `422 Unprocessable Content`, as the IETF draft says.
    pub fn mismatch_status(mut self, status: StatusCode) -> Self {
        self.config.mismatch_status = status;
        self
    }

    /// Answer a request whose scope function finds no scope as the
    /// client's error, with `status` (say `400` when the scope comes from a
    /// header the client sends, `401` when it comes from credentials):
    /// [`IdempotencyRejection::NoOwner`], which tells the client what its
    /// request lacks. By default such a request is the server's error,
    /// `500` [`IdempotencyRejection::MissingScope`] (logged), as when the
    /// layer runs outside the authentication layer that sets the scope.
    ///
    /// # Panics
    /// If `status` is not a client error (`4xx`): a server error is what
    /// the default already answers.
    pub fn missing_scope_status(mut self, status: StatusCode) -> Self {
        assert!(
            status.is_client_error(),
            "missing_scope_status takes a client error (4xx), not {status}: without it, a \
             request with no scope is answered 500"
        );
        self.config.missing_scope_status = Some(status);
        self
    }

    /// Choose what the request's fingerprint covers: the bytes `covers`
    /// returns for a request (its parts, and its body as read), instead of
    /// the default (method, path, query, content type and body). The same
    /// key with other bytes is a mismatch (`422`); with equal bytes, a
    /// duplicate. For example, leave out a field that changes on every
    /// retry (a timestamp, a nonce), as Powertools'
    /// `payload_validation_jmespath` does. The bytes are hashed (SHA-256)
    /// and never stored. With [`derive_key`](Self::derive_key), the derived
    /// key is made from them too.
    ///
    /// ```
    /// # fn demo(locks: redlock_runtime::LockClient) {
    /// // A JSON body whose `sent_at` differs on each retry of one payment.
    /// let layer = redlock_axum::IdempotencyLayer::global(locks).fingerprint(|parts, body| {
    ///     let mut json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    ///     if let Some(fields) = json.as_object_mut() {
    ///         fields.remove("sent_at");
    ///     }
    ///     let mut covered = parts.uri.path().as_bytes().to_vec();
    ///     covered.extend_from_slice(json.to_string().as_bytes());
    ///     covered
    /// });
    /// # }
    /// ```
    pub fn fingerprint<F>(mut self, covers: F) -> Self
    where
        F: Fn(&Parts, &[u8]) -> Vec<u8> + Send + Sync + 'static,
    {
        self.config.fingerprint = Some(Arc::new(covers));
        self
    }

    /// Which responses are stored for replay; the key of any other is
    /// released so that a retry runs the handler again. Defaults to
    /// [`default_store_policy`]: 2xx and 4xx, except 401, 403, 408, 409,
    /// 425 and 429.
    /// (A panicking handler always releases its key.)
    pub fn store_if<F>(mut self, policy: F) -> Self
    where
        F: Fn(StatusCode) -> bool + Send + Sync + 'static,
    {
        self.config.store_if = Arc::new(policy);
        self
    }

    /// Also store and replay this response header (the defaults are
    /// [`DEFAULT_REPLAY_HEADERS`]).
    ///
    /// # Panics
    /// For a header in [`NEVER_REPLAYED`] (`set-cookie`, `date`, request
    /// and trace ids, ...).
    pub fn replay_header(mut self, name: HeaderName) -> Self {
        check_replayable(&name);
        if !self.config.replay_headers.contains(&name) {
            self.config.replay_headers.push(name);
        }
        self
    }

    /// Store and replay exactly these response headers.
    ///
    /// # Panics
    /// For a header in [`NEVER_REPLAYED`].
    pub fn replay_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.config.replay_headers = names.into_iter().inspect(check_replayable).collect();
        self
    }

    /// The prefix of the layer's Redis keys. Defaults to `idem:`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.key_prefix = prefix.into();
        self
    }

    /// The time limit of each Redis operation (claim, renew, complete,
    /// release); one that runs over counts as Redis being unavailable.
    /// Defaults to 1 s.
    pub fn redis_timeout(mut self, timeout: Duration) -> Self {
        self.config.redis_timeout = timeout;
        self
    }

    /// Turn the layer's rejections into responses of your own (the default
    /// is [`IdempotencyRejection`]'s problem JSON).
    pub fn map_rejection<F>(mut self, map: F) -> Self
    where
        F: Fn(IdempotencyRejection) -> Response + Send + Sync + 'static,
    {
        self.config.map_rejection = Some(Arc::new(map));
        self
    }
}

fn check_replayable(name: &HeaderName) {
    assert!(
        !NEVER_REPLAYED.contains(&name.as_str()) && name != header::SET_COOKIE,
        "the `{name}` header belongs to one response and is never replayed"
    );
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotency::new(inner, Arc::new(self.config.clone()))
    }
}
