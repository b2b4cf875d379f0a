//! One idempotent request's life, start to end: read the body, claim the
//! record, then run the handler (and complete or release the record),
//! answer `409` while another request holds it, replay what it stored, or
//! reject. Why a request got `409`, `422` or `503` is answered here and in
//! `rejection.rs`; what is stored and replayed, in `body.rs`.

use std::future::poll_fn;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use bytes::Bytes;
use futures_util::FutureExt;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request};
use http_body::Body as HttpBody;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use redlock_runtime::records::{Claimed, End, RecordKeys, RecordLease};
use tower_service::Service;

use super::body::{Captured, RetainContentFree, take_response};
use super::config::Config;
use super::service::IDEMPOTENT_REPLAYED;
use crate::context::IdempotencyContext;
use crate::fingerprint::{chosen_fingerprint, fingerprint, short_hash};
use crate::rejection::IdempotencyRejection;
use crate::store::{Stored, record_keys};

use crate::{BoxError, TARGET};

/// Where the request's key comes from.
pub(crate) enum KeyKind {
    Client(String),
    /// Derived from the request; completed records are kept this long.
    Derived(Duration),
}

/// An idempotent request whose body is still to be read.
pub(crate) struct Pending {
    pub(crate) config: Arc<Config>,
    pub(crate) parts: Parts,
    pub(crate) key: KeyKind,
    pub(crate) scope_hash: String,
}

impl Pending {
    pub(crate) async fn run<S, B>(self, inner: S, body: Body) -> Result<Response, S::Error>
    where
        S: Service<Request<Body>, Response = Response<B>> + Send,
        S::Future: Send,
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let Self {
            config,
            parts,
            key,
            scope_hash,
        } = self;
        let bytes = match Limited::new(body, config.body_limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<LengthLimitError>() => {
                return Ok(config.reject(IdempotencyRejection::BodyTooLarge {
                    limit: config.body_limit,
                }));
            }
            Err(_) => return Ok(config.reject(IdempotencyRejection::BodyUnreadable)),
        };
        let fingerprint = match &config.fingerprint {
            Some(covers) => chosen_fingerprint(&covers(&parts, &bytes)),
            None => fingerprint(&parts, &bytes),
        };
        let (key_hash, derived, retention) = match &key {
            KeyKind::Client(key) => (
                short_hash(&[b"key", key.as_bytes()]),
                false,
                config.retention,
            ),
            KeyKind::Derived(window) => (
                short_hash(&[b"derived", fingerprint.as_bytes()]),
                true,
                *window,
            ),
        };
        let route = parts
            .extensions
            .get::<MatchedPath>()
            .map_or(parts.uri.path(), MatchedPath::as_str);
        let record = record_keys(
            &config.key_prefix,
            &scope_hash,
            parts.method.as_str(),
            route,
            derived,
            &key_hash,
        );
        let request = Claiming {
            config,
            record,
            key_hash,
            derived,
            retention,
        };
        request.run(inner, parts, bytes, &fingerprint).await
    }
}

/// A request about to claim its record, then run or answer from it.
struct Claiming {
    config: Arc<Config>,
    record: RecordKeys,
    key_hash: String,
    derived: bool,
    retention: Duration,
}

impl Claiming {
    async fn run<S, B>(
        self,
        mut inner: S,
        parts: Parts,
        bytes: Bytes,
        fingerprint: &str,
    ) -> Result<Response, S::Error>
    where
        S: Service<Request<Body>, Response = Response<B>> + Send,
        S::Future: Send,
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let config = Arc::clone(&self.config);
        match self.claim(fingerprint).await {
            Ok(Claimed::Claimed(lease)) => {
                crate::metrics::outcome("claimed");
                return self.execute(inner, parts, bytes, lease).await;
            }
            Ok(Claimed::Processing { lease_left }) => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, "duplicate while the first request runs: 409");
                return Ok(config.reject(IdempotencyRejection::Processing {
                    retry_after: lease_left.min(config.retry_hint),
                }));
            }
            Ok(Claimed::Mismatch) => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, "key reused with a different request");
                return Ok(config.reject(IdempotencyRejection::Mismatch {
                    status: config.mismatch_status,
                }));
            }
            Ok(Claimed::Completed(completion)) => match Stored::from_completion(completion) {
                Ok(stored) => return Ok(self.replay(stored)),
                Err(error) => {
                    tracing::error!(target: TARGET, key_hash = %self.key_hash, %error, "idempotency store unavailable: a stored record does not decode");
                }
            },
            Ok(_) => {
                tracing::error!(target: TARGET, key_hash = %self.key_hash, "idempotency store unavailable: a claim answer this version of redlock-axum does not know (use the redlock-runtime version it was released with)");
            }
            Err(()) => {}
        }
        // The store failed (logged above).
        if config.fail_open {
            crate::metrics::outcome("store_error");
            tracing::warn!(target: TARGET, key_hash = %self.key_hash, "idempotency store unavailable; request let through without idempotency (fail_open)");
            let request = Request::from_parts(parts, Body::from(bytes));
            poll_fn(|cx| inner.poll_ready(cx)).await?;
            return Ok(inner.call(request).await?.map(Body::new));
        }
        Ok(config.reject(IdempotencyRejection::Unavailable {
            retry_after: Duration::from_secs(1),
        }))
    }

    /// Claims the record; with `wait_for_result`, waits while another
    /// request holds it. `Err(())`: the store failed (logged).
    async fn claim(&self, fingerprint: &str) -> Result<Claimed, ()> {
        let config = &self.config;
        let fence_ttl = config.retention.max(self.retention) + config.lease;
        let terms = (config.lease, fence_ttl, config.redis_timeout);
        // A claim whose answer was lost is given back by the runtime.
        config
            .store
            .claim(&self.record, fingerprint, terms, config.wait.unwrap_or_default())
            .await
            .map_err(|error| {
                tracing::error!(target: TARGET, key_hash = %self.key_hash, %error, "idempotency store unavailable");
            })
    }

    fn context(&self, fence: u64, replayed: bool) -> IdempotencyContext {
        IdempotencyContext {
            key_hash: self.key_hash.clone(),
            fencing_token: fence,
            replayed,
            derived: self.derived,
        }
    }

    /// The stored response, as first answered (allow-listed headers only).
    fn replay(&self, stored: Stored) -> Response {
        tracing::debug!(target: TARGET, key_hash = %self.key_hash, status = stored.status.as_u16(), "replaying the stored response");
        let mut headers = HeaderMap::new();
        for (name, value) in &stored.headers {
            if self.config.replays(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        let mut response = match stored.body {
            Some(body) => {
                crate::metrics::outcome("replayed");
                let mut response = Response::new(Body::from(body));
                *response.status_mut() = stored.status;
                *response.headers_mut() = headers;
                response
            }
            None => {
                headers.retain_content_free();
                self.config.reject(IdempotencyRejection::NotReplayable {
                    original_status: stored.status,
                    headers,
                })
            }
        };
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        response.extensions_mut().insert(self.context(0, true));
        response
    }

    /// Runs the handler holding the record (the client's watchdog renews
    /// its lease meanwhile), then completes or releases the record. If this
    /// task is cancelled first (runtime shutdown), dropping the lease
    /// releases the record.
    async fn execute<S, B>(
        self,
        mut inner: S,
        parts: Parts,
        bytes: Bytes,
        lease: RecordLease,
    ) -> Result<Response, S::Error>
    where
        S: Service<Request<Body>, Response = Response<B>> + Send,
        S::Future: Send,
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let fence = lease.fencing_token();
        let context = self.context(fence, false);
        tracing::debug!(target: TARGET, key_hash = %self.key_hash, fence, "claimed; running the handler");
        let mut request = Request::from_parts(parts, Body::from(bytes));
        request.extensions_mut().insert(context.clone());
        let config = Arc::clone(&self.config);
        let work = async {
            poll_fn(|cx| inner.poll_ready(cx)).await?;
            let response = inner.call(request).await?;
            Ok::<_, S::Error>(take_response(response, &config).await)
        };
        let outcome = match AssertUnwindSafe(work).catch_unwind().await {
            Err(panic) => {
                tracing::warn!(target: TARGET, key_hash = %self.key_hash, "the handler panicked; releasing the key so that a retry runs");
                self.finish(lease, End::Release).await;
                std::panic::resume_unwind(panic);
            }
            Ok(Err(error)) => {
                self.finish(lease, End::Release).await;
                return Err(error);
            }
            Ok(Ok(outcome)) => outcome,
        };
        let mut response = match outcome {
            Captured::Store { stored, response } => {
                let result = stored.completion();
                let retention = self.retention;
                self.finish(lease, End::Complete { result, retention })
                    .await;
                response
            }
            Captured::Release { response } => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, status = response.status().as_u16(), "response not stored; releasing the key");
                self.finish(lease, End::Release).await;
                response
            }
        };
        response.extensions_mut().insert(context);
        Ok(response)
    }

    /// Ends the record (see [`RecordLease::end`]): the response goes out
    /// once it is done, or after `redis_timeout × COMPLETE_ATTEMPTS`
    /// whatever the store does (see the guide, "When Redis fails
    /// mid-request"). Never two runs at once: the record stays claimed
    /// until it is completed, released or expired.
    async fn finish(&self, lease: RecordLease, end: End) {
        let ended = lease.end(end, self.config.redis_timeout).await;
        tracing::debug!(target: TARGET, key_hash = %self.key_hash, ?ended, "record ended");
    }
}
