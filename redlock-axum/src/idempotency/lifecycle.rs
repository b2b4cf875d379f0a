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
use redlock_runtime::records::{Claimed, RecordKeys, RecordLease};
use tokio::time::Instant;
use tower_service::Service;

use super::body::{Captured, RetainContentFree, take_response};
use super::config::Config;
use super::service::IDEMPOTENT_REPLAYED;
use crate::context::IdempotencyContext;
use crate::fingerprint::{chosen_fingerprint, fingerprint, short_hash};
use crate::rejection::IdempotencyRejection;
use crate::store::{RecordChanges, Stored, record_keys};

use crate::{BoxError, TARGET};

/// The longest a waiting duplicate sleeps between two looks at the record
/// when no push comes.
const MAX_POLL: Duration = Duration::from_millis(250);

/// Attempts at storing a completed response before giving up on it. The
/// response waits for the store at most `redis_timeout` times this (see
/// [`Claiming::finish`]).
const COMPLETE_ATTEMPTS: u32 = 3;

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
        let deadline = config.wait.map(|wait| Instant::now() + wait);
        let fence_ttl = config.retention.max(self.retention) + config.lease;
        let mut changes: Option<RecordChanges> = None;
        let mut woken = false;
        loop {
            // A claim whose answer was lost is given back by the runtime.
            let claim = config
                .store
                .claim(
                    &self.record,
                    fingerprint,
                    config.lease,
                    fence_ttl,
                    config.redis_timeout,
                )
                .await
                .map_err(|error| {
                    tracing::error!(target: TARGET, key_hash = %self.key_hash, %error, "idempotency store unavailable");
                })?;
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match (claim, left) {
                (Claimed::Processing { lease_left }, Some(left)) if !left.is_zero() => {
                    match changes.as_mut() {
                        None => {
                            // Subscribe first, then look again: a completion
                            // in between is not missed.
                            changes = Some(
                                config
                                    .store
                                    .subscribe(&self.record, config.redis_timeout.min(left))
                                    .await,
                            );
                        }
                        Some(changes) => {
                            let pause = left
                                .min(MAX_POLL)
                                .min(lease_left.max(Duration::from_millis(5)));
                            woken = changes.changed(pause).await;
                        }
                    }
                }
                (claim, _) => {
                    if woken
                        && let Some(changes) = &changes
                        && !matches!(claim, Claimed::Claimed(_))
                    {
                        // One message wakes one waiter per process: pass
                        // the news on to the next duplicate.
                        changes.pass_on();
                    }
                    return Ok(claim);
                }
            }
        }
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
                self.finish(self.ending().release(lease)).await;
                std::panic::resume_unwind(panic);
            }
            Ok(Err(error)) => {
                self.finish(self.ending().release(lease)).await;
                return Err(error);
            }
            Ok(Ok(outcome)) => outcome,
        };
        let mut response = match outcome {
            Captured::Store { stored, response } => {
                self.finish(self.ending().complete(lease, stored)).await;
                response
            }
            Captured::Release { response } => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, status = response.status().as_u16(), "response not stored; releasing the key");
                self.finish(self.ending().release(lease)).await;
                response
            }
        };
        response.extensions_mut().insert(context);
        Ok(response)
    }

    /// What ends the record once the handler is done.
    fn ending(&self) -> Ending {
        Ending {
            redis_timeout: self.config.redis_timeout,
            key_hash: self.key_hash.clone(),
            retention: self.retention,
        }
    }

    /// Runs `end` (the record's completion or release) from a task of its
    /// own, and waits for it at most `redis_timeout × COMPLETE_ATTEMPTS`:
    /// the response goes out then, whatever the store does, and `end` goes
    /// on in the background. It is bounded by the record's lease: once its
    /// attempts fail, dropping the lease releases the record, retried until
    /// the lease would end (see the guide, "When Redis fails mid-request").
    /// Until then a retry gets `409`; after it, the replay if the
    /// completion landed, else a new run. Never two runs at once: the
    /// record stays claimed until it is completed, released or expired.
    async fn finish(&self, end: impl Future<Output = ()> + Send + 'static) {
        let bound = self.config.redis_timeout * COMPLETE_ATTEMPTS;
        if tokio::time::timeout(bound, tokio::spawn(end))
            .await
            .is_err()
        {
            tracing::warn!(target: TARGET, key_hash = %self.key_hash, bound_ms = bound.as_millis() as u64, "the idempotency store is slow to record the end of the request; the response goes out now and the record is completed or released in the background (a retry meanwhile gets 409)");
        }
    }
}

/// The end of a record, run from a task of its own (see
/// [`Claiming::finish`]).
struct Ending {
    redis_timeout: Duration,
    key_hash: String,
    retention: Duration,
}

impl Ending {
    /// Stores the completed response (owner-checked), retrying a failed
    /// store a few times; if it never succeeds, dropping the lease releases
    /// the record (owner-checked: a completion that did land stays).
    async fn complete(self, mut lease: RecordLease, stored: Stored) {
        let completion = stored.completion();
        for attempt in 1..=COMPLETE_ATTEMPTS {
            match lease
                .complete(&completion, self.retention, self.redis_timeout)
                .await
            {
                Ok(true) => {
                    tracing::debug!(target: TARGET, key_hash = %self.key_hash, status = stored.status.as_u16(), replayable = stored.body.is_some(), "response stored");
                    return;
                }
                Ok(false) => {
                    tracing::warn!(target: TARGET, key_hash = %self.key_hash, "the lease was lost before the response was stored; the record was left alone and a retry may run the handler again");
                    return;
                }
                Err(error) if attempt == COMPLETE_ATTEMPTS => {
                    tracing::error!(target: TARGET, key_hash = %self.key_hash, %error, "could not store the response; the key is released and a retry would run the handler again");
                }
                Err(error) => {
                    tracing::debug!(target: TARGET, key_hash = %self.key_hash, %error, attempt, "storing the response failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50) * attempt).await;
                }
            }
        }
    }

    /// Releases the record (owner-checked) so that a retry runs.
    async fn release(self, lease: RecordLease) {
        match lease.release(self.redis_timeout).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, "release: the record was no longer ours");
            }
            Err(error) => {
                tracing::warn!(target: TARGET, key_hash = %self.key_hash, %error, "could not release the key; retried until its lease runs out");
            }
        }
    }
}
