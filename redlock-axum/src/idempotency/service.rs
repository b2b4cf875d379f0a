//! [`Idempotency`]: the service. It decides which requests the layer
//! handles and hands each to its lifecycle (`lifecycle.rs`), spawned so that
//! a client that disconnects neither cancels the handler nor strands its key.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::Request;
use http::request::Parts;
use http_body::Body as HttpBody;
use tower_service::Service;

use super::config::{Config, Scope};
use super::future::ResponseFuture;
use super::lifecycle::{KeyKind, Pending};
use crate::fingerprint::short_hash;
use crate::key::validate;
use crate::rejection::IdempotencyRejection;
use crate::{BoxError, TARGET};

/// The header set on replayed responses: `Idempotent-Replayed: true`.
pub const IDEMPOTENT_REPLAYED: http::HeaderName =
    http::HeaderName::from_static("idempotent-replayed");

/// Middleware that makes requests idempotent by key; made by
/// [`IdempotencyLayer`](crate::IdempotencyLayer) (see the [module docs](crate::idempotency)).
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
                    let rejection = match config.missing_scope_status {
                        Some(status) => {
                            tracing::debug!(target: TARGET, method = %parts.method, path = parts.uri.path(), %status, "the request has no idempotency scope");
                            IdempotencyRejection::NoOwner { status }
                        }
                        None => {
                            tracing::error!(target: TARGET, method = %parts.method, path = parts.uri.path(), "the idempotency scope function returned None: is the layer inside your authentication layer?");
                            IdempotencyRejection::MissingScope
                        }
                    };
                    return ResponseFuture::reject(config.reject(rejection));
                }
            },
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
