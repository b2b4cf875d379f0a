//! [`Idempotency`]: the service the layer wraps a route in, and the work of
//! one idempotent request.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use bytes::Bytes;
use futures_util::FutureExt;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request};
use http_body::{Body as HttpBody, Frame};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use super::future::ResponseFuture;
use super::layer::{Config, IdempotencyLayer, NoScope, Scope};
use crate::context::IdempotencyContext;
use crate::fingerprint::{fingerprint, short_hash};
use crate::key::validate;
use crate::rejection::IdempotencyRejection;
use crate::store::{Claim, IdempotencyStore, Stored, Watcher, record_keys};
use redlock_runtime::__private::record::{RecordKeys, RecordLease};

/// The response header set on replayed responses.
pub const IDEMPOTENT_REPLAYED: http::HeaderName =
    http::HeaderName::from_static("idempotent-replayed");

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Log target of the layer's events.
const TARGET: &str = "redlock_axum";

/// The longest a waiting duplicate sleeps between two looks at the record
/// when no push comes.
const MAX_POLL: Duration = Duration::from_millis(250);

/// Attempts at storing a completed response before giving up on it.
const COMPLETE_ATTEMPTS: u32 = 3;

/// Middleware that makes requests idempotent by key; made by
/// [`IdempotencyLayer`] (see the [module docs](crate::idempotency)).
#[derive(Clone)]
pub struct Idempotency<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for Idempotency<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S> Idempotency<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }

    /// The layer, as [`IdempotencyLayer::new`]: choose a scope next.
    pub fn layer(store: impl Into<IdempotencyStore>) -> IdempotencyLayer<NoScope> {
        IdempotencyLayer::new(store)
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// Where the request's key comes from.
enum KeyKind {
    Client(String),
    /// Derived from the request; completed records are kept this long.
    Derived(Duration),
}

impl<S, B> Service<Request<Body>> for Idempotency<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let config = &self.config;
        if !config.methods.contains(req.method()) {
            return ResponseFuture::inner(self.inner.call(req));
        }
        let (parts, body) = req.into_parts();
        let key = config
            .extract
            .extract_key(&parts)
            .and_then(|key| key.map(|k| validate(&k).map(|()| k)).transpose());
        let key = match key {
            Ok(Some(key)) => KeyKind::Client(key),
            Ok(None) if config.required => {
                return ResponseFuture::reject(config.reject(IdempotencyRejection::MissingKey {
                    header: config.key_source.clone(),
                }));
            }
            Ok(None) => match config.derive {
                Some(window) => KeyKind::Derived(window),
                None => {
                    return ResponseFuture::inner(
                        self.inner.call(Request::from_parts(parts, body)),
                    );
                }
            },
            Err(e) => {
                return ResponseFuture::reject(config.reject(IdempotencyRejection::InvalidKey(e)));
            }
        };
        let scope_hash = match &config.scope {
            Scope::Global => short_hash(&[b"global"]),
            Scope::Per(scope) => match scope(&parts) {
                Some(scope) => short_hash(&[b"scope", scope.as_bytes()]),
                None => {
                    tracing::error!(target: TARGET, method = %parts.method, path = parts.uri.path(), "the idempotency scope function returned None: is the layer inside your authentication layer?");
                    return ResponseFuture::reject(
                        config.reject(IdempotencyRejection::MissingScope),
                    );
                }
            },
            Scope::Unset => {
                return ResponseFuture::reject(config.reject(IdempotencyRejection::MissingScope));
            }
        };
        if let Some(len) = content_length(&parts)
            && len > config.body_limit as u64
        {
            return ResponseFuture::reject(config.reject(IdempotencyRejection::BodyTooLarge {
                limit: config.body_limit,
            }));
        }
        // The ready service goes to the task; a fresh clone stays here.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let request = Pending {
            config: Arc::clone(config),
            parts,
            key,
            scope_hash,
        };
        // Spawned: a client that disconnects neither cancels the handler's
        // side effect nor strands its key.
        ResponseFuture::spawned(tokio::spawn(request.run(inner, body)))
    }
}

fn content_length(parts: &Parts) -> Option<u64> {
    parts
        .headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// An idempotent request whose body is still to be read.
struct Pending {
    config: Arc<Config>,
    parts: Parts,
    key: KeyKind,
    scope_hash: String,
}

impl Pending {
    async fn run<S, B>(self, inner: S, body: Body) -> Result<Response, S::Error>
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
        let fingerprint = fingerprint(&parts, &bytes);
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
        let request = Claimed {
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
struct Claimed {
    config: Arc<Config>,
    record: RecordKeys,
    key_hash: String,
    derived: bool,
    retention: Duration,
}

impl Claimed {
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
        let claim = match self.claim(fingerprint).await {
            Ok(claim) => claim,
            Err(()) if config.fail_open => {
                crate::metrics::outcome("store_error");
                tracing::warn!(target: TARGET, key_hash = %self.key_hash, "idempotency store unavailable; request let through without idempotency (fail_open)");
                let request = Request::from_parts(parts, Body::from(bytes));
                poll_fn(|cx| inner.poll_ready(cx)).await?;
                return Ok(inner.call(request).await?.map(Body::new));
            }
            Err(()) => {
                return Ok(config.reject(IdempotencyRejection::Unavailable {
                    retry_after: Duration::from_secs(1),
                }));
            }
        };
        match claim {
            Claim::Claimed(lease) => {
                crate::metrics::outcome("claimed");
                self.execute(inner, parts, bytes, lease).await
            }
            Claim::Processing { lease_left } => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, "duplicate while the first request runs: 409");
                Ok(config.reject(IdempotencyRejection::Processing {
                    retry_after: lease_left,
                }))
            }
            Claim::Mismatch => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, "key reused with a different request");
                Ok(config.reject(IdempotencyRejection::Mismatch {
                    status: config.mismatch_status,
                }))
            }
            Claim::Completed(stored) => Ok(self.replay(stored)),
        }
    }

    /// Claims the record; with `wait_for_result`, waits while another
    /// request holds it. `Err(())`: the store failed (logged).
    async fn claim(&self, fingerprint: &str) -> Result<Claim, ()> {
        let config = &self.config;
        let deadline = config.wait.map(|wait| Instant::now() + wait);
        let fence_ttl = config.retention.max(self.retention) + config.lease;
        let mut watcher: Option<Watcher> = None;
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
                (Claim::Processing { lease_left }, Some(left)) if !left.is_zero() => {
                    match watcher.as_mut() {
                        None => {
                            // Watch first, then look again: a completion
                            // in between is not missed.
                            watcher = Some(
                                config
                                    .store
                                    .watch(&self.record, config.redis_timeout.min(left))
                                    .await,
                            );
                        }
                        Some(watcher) => {
                            let pause = left
                                .min(MAX_POLL)
                                .min(lease_left.max(Duration::from_millis(5)));
                            woken = watcher.changed(pause).await;
                        }
                    }
                }
                (claim, _) => {
                    if woken
                        && let Some(watcher) = &watcher
                        && !matches!(claim, Claim::Claimed(_))
                    {
                        // One message wakes one waiter per process: pass
                        // the news on to the next duplicate.
                        watcher.pass_on();
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
        mut lease: RecordLease,
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
                self.release(lease).await;
                std::panic::resume_unwind(panic);
            }
            Ok(Err(error)) => {
                self.release(lease).await;
                return Err(error);
            }
            Ok(Ok(outcome)) => outcome,
        };
        let mut response = match outcome {
            Taken::Store { stored, response } => {
                self.complete(&mut lease, &stored).await;
                response
            }
            Taken::Release { response } => {
                tracing::debug!(target: TARGET, key_hash = %self.key_hash, status = response.status().as_u16(), "response not stored; releasing the key");
                self.release(lease).await;
                response
            }
        };
        response.extensions_mut().insert(context);
        Ok(response)
    }

    /// Stores the completed response (owner-checked), retrying a failed
    /// store a few times; if it never succeeds, dropping the lease releases
    /// the record (owner-checked: a completion that did land stays).
    async fn complete(&self, lease: &mut RecordLease, stored: &Stored) {
        let config = &self.config;
        let completion = stored.completion();
        for attempt in 1..=COMPLETE_ATTEMPTS {
            match lease
                .complete(&completion, self.retention, config.redis_timeout)
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
    async fn release(&self, lease: RecordLease) {
        match lease.release(self.config.redis_timeout).await {
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

/// What to do with the handler's response.
enum Taken {
    /// Store (replayable, or too large: body `None`), then send.
    Store { stored: Stored, response: Response },
    /// Release the key, then send.
    Release { response: Response },
}

/// Reads the response body up to the store limit, if the status is stored.
async fn take_response<B>(response: Response<B>, config: &Config) -> Taken
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    let mut body = Body::new(body);
    if !(config.store_if)(parts.status) {
        return Taken::Release {
            response: Response::from_parts(parts, body),
        };
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if config.replays(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    let mut frames = VecDeque::new();
    let mut size = 0usize;
    let not_replayable = |headers: HeaderMap| Stored {
        status: parts.status,
        headers,
        body: None,
    };
    loop {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => {
                size = size.saturating_add(frame.data_ref().map_or(0, Bytes::len));
                frames.push_back(frame);
                if size > config.store_limit {
                    let stored = not_replayable(headers);
                    let body = Body::new(Prefixed {
                        frames,
                        error: None,
                        rest: body,
                    });
                    return Taken::Store {
                        stored,
                        response: Response::from_parts(parts, body),
                    };
                }
            }
            Some(Err(error)) => {
                // The handler ran, so it must not run again; what it sent
                // cannot be replayed.
                tracing::warn!(target: TARGET, %error, "the response body failed; remembered as completed, not replayable");
                let stored = not_replayable(headers);
                let body = Body::new(Prefixed {
                    frames,
                    error: Some(error),
                    rest: Body::empty(),
                });
                return Taken::Store {
                    stored,
                    response: Response::from_parts(parts, body),
                };
            }
        }
    }
    let mut data = Vec::with_capacity(size);
    for frame in &frames {
        if let Some(chunk) = frame.data_ref() {
            data.extend_from_slice(chunk);
        }
    }
    let data = Bytes::from(data);
    let stored = Stored {
        status: parts.status,
        headers,
        body: Some(data.clone()),
    };
    // Trailers are not stored (nor replayed), but the first client gets
    // them.
    let body = if frames.iter().any(Frame::is_trailers) {
        Body::new(Prefixed {
            frames,
            error: None,
            rest: Body::empty(),
        })
    } else {
        Body::from(data)
    };
    Taken::Store {
        stored,
        response: Response::from_parts(parts, body),
    }
}

pin_project! {
    /// The frames already read, then an error or the rest of the body.
    struct Prefixed {
        frames: VecDeque<Frame<Bytes>>,
        error: Option<axum::Error>,
        #[pin]
        rest: Body,
    }
}

impl HttpBody for Prefixed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        if let Some(frame) = this.frames.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(error) = this.error.take() {
            return Poll::Ready(Some(Err(error)));
        }
        this.rest.poll_frame(cx)
    }
}

/// Drops the content headers of a stored response (the answer has a
/// problem body of its own).
trait RetainContentFree {
    fn retain_content_free(&mut self);
}

impl RetainContentFree for HeaderMap {
    fn retain_content_free(&mut self) {
        let names: Vec<_> = self
            .keys()
            .filter(|n| n.as_str().starts_with("content-"))
            .cloned()
            .collect();
        for name in names {
            self.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;
    use http_body_util::StreamBody;

    fn config(store_limit: usize) -> Config {
        IdempotencyLayer::new(redlock_runtime::LockClient::in_memory())
            .global_scope()
            .store_limit(store_limit)
            .config
    }

    type Frames = Vec<Result<Frame<Bytes>, std::io::Error>>;

    type TestBody = StreamBody<
        futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>,
    >;

    fn response(status: StatusCode, frames: Frames) -> Response<TestBody> {
        let mut response = Response::new(StreamBody::new(futures_util::stream::iter(frames)));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert("location", HeaderValue::from_static("/x"));
        response
            .headers_mut()
            .insert("set-cookie", HeaderValue::from_static("s=1"));
        response
    }

    fn data(s: &'static str) -> Result<Frame<Bytes>, std::io::Error> {
        Ok(Frame::data(Bytes::from_static(s.as_bytes())))
    }

    async fn frames_of(response: Response) -> (Vec<u8>, Option<HeaderMap>, bool) {
        let mut body = response.into_body();
        let (mut bytes, mut trailers, mut failed) = (Vec::new(), None, false);
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => match frame.into_data() {
                    Ok(chunk) => bytes.extend_from_slice(&chunk),
                    Err(frame) => trailers = frame.into_trailers().ok(),
                },
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        (bytes, trailers, failed)
    }

    #[tokio::test]
    async fn a_small_response_is_stored_with_allow_listed_headers_only() {
        let taken = take_response(
            response(StatusCode::CREATED, vec![data("ab"), data("c")]),
            &config(16),
        )
        .await;
        let Taken::Store { stored, response } = taken else {
            panic!("not stored")
        };
        assert_eq!(stored.body.as_deref(), Some(&b"abc"[..]));
        assert_eq!(
            stored.headers.get("location").map(|v| v.as_bytes()),
            Some(&b"/x"[..])
        );
        assert!(stored.headers.get("set-cookie").is_none());
        assert_eq!(
            response.headers()["set-cookie"],
            "s=1",
            "the first client gets every header"
        );
        assert_eq!(frames_of(response).await, (b"abc".to_vec(), None, false));
    }

    #[tokio::test]
    async fn headers_describing_the_body_are_stored_whatever_the_allow_list() {
        let mut config = config(64);
        config.replay_headers = vec![http::header::CONTENT_TYPE];
        let mut gzip = response(StatusCode::OK, vec![data("gz")]);
        gzip.headers_mut()
            .insert("content-encoding", HeaderValue::from_static("gzip"));
        let Taken::Store { stored, .. } = take_response(gzip, &config).await else {
            panic!("not stored")
        };
        assert_eq!(
            stored.headers.get("content-encoding").map(|v| v.as_bytes()),
            Some(&b"gzip"[..])
        );
        assert!(stored.headers.get("location").is_none(), "not allow-listed");
    }

    #[tokio::test]
    async fn a_large_response_is_delivered_whole_and_stored_without_its_body() {
        let taken = take_response(
            response(StatusCode::OK, vec![data("0123"), data("4567"), data("89")]),
            &config(5),
        )
        .await;
        let Taken::Store { stored, response } = taken else {
            panic!("not stored")
        };
        assert!(stored.body.is_none());
        assert_eq!(stored.status, StatusCode::OK);
        assert_eq!(
            frames_of(response).await,
            (b"0123456789".to_vec(), None, false)
        );
    }

    #[tokio::test]
    async fn a_failing_body_is_not_replayable_and_the_client_sees_the_failure() {
        let broken = Err(std::io::Error::other("stream broke"));
        let taken = take_response(
            response(StatusCode::OK, vec![data("part"), broken]),
            &config(64),
        )
        .await;
        let Taken::Store { stored, response } = taken else {
            panic!("not stored")
        };
        assert!(stored.body.is_none());
        assert_eq!(frames_of(response).await, (b"part".to_vec(), None, true));
    }

    #[tokio::test]
    async fn trailers_reach_the_first_client() {
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        let taken = take_response(
            response(
                StatusCode::OK,
                vec![data("x"), Ok(Frame::trailers(trailers.clone()))],
            ),
            &config(64),
        )
        .await;
        let Taken::Store { stored, response } = taken else {
            panic!("not stored")
        };
        assert_eq!(stored.body.as_deref(), Some(&b"x"[..]));
        assert_eq!(
            frames_of(response).await,
            (b"x".to_vec(), Some(trailers), false)
        );
    }

    #[tokio::test]
    async fn statuses_outside_the_policy_are_released() {
        for status in [500, 503, 401, 403, 408, 409, 425, 429, 302] {
            let status = StatusCode::from_u16(status).expect("status");
            let taken = take_response(response(status, vec![data("x")]), &config(64)).await;
            assert!(
                matches!(taken, Taken::Release { .. }),
                "{status} must release the key"
            );
        }
        for status in [200, 201, 204, 400, 404, 422] {
            let status = StatusCode::from_u16(status).expect("status");
            let taken = take_response(response(status, vec![data("x")]), &config(64)).await;
            assert!(
                matches!(taken, Taken::Store { .. }),
                "{status} must be stored"
            );
        }
    }
}
