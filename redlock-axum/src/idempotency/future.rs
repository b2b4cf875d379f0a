//! [`ResponseFuture`]: the future of [`Idempotency`](crate::Idempotency).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::Body as HttpBody;
use pin_project_lite::pin_project;
use tokio::task::JoinHandle;

use crate::rejection::IdempotencyRejection;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project! {
    /// The response of [`Idempotency`](crate::Idempotency): the inner
    /// service's (methods and requests the layer does not cover), an early
    /// rejection, or the result of the spawned task that runs an idempotent
    /// request.
    pub struct ResponseFuture<F, E> {
        #[pin]
        kind: Kind<F, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, E> {
        Inner { #[pin] future: F },
        Reject { response: Option<Response> },
        Spawned { #[pin] handle: JoinHandle<Result<Response, E>> },
    }
}

impl<F, E> ResponseFuture<F, E> {
    pub(crate) fn inner(future: F) -> Self {
        Self {
            kind: Kind::Inner { future },
        }
    }

    pub(crate) fn reject(response: Response) -> Self {
        Self {
            kind: Kind::Reject {
                response: Some(response),
            },
        }
    }

    pub(crate) fn spawned(handle: JoinHandle<Result<Response, E>>) -> Self {
        Self {
            kind: Kind::Spawned { handle },
        }
    }
}

impl<F, E> fmt::Debug for ResponseFuture<F, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Inner { .. } => "inner",
            Kind::Reject { .. } => "reject",
            Kind::Spawned { .. } => "spawned",
        };
        f.debug_struct("ResponseFuture")
            .field("kind", &kind)
            .finish()
    }
}

impl<F, B, E> Future for ResponseFuture<F, E>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { future } => {
                let response = ready!(future.poll(cx))?;
                Poll::Ready(Ok(response.map(Body::new)))
            }
            KindProj::Reject { response } => Poll::Ready(Ok(response.take().unwrap_or_default())),
            KindProj::Spawned { handle } => match ready!(handle.poll(cx)) {
                Ok(result) => Poll::Ready(result),
                // The handler panicked (its key is released): panic here as
                // it would have without the layer.
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                // The runtime is shutting down.
                Err(_) => Poll::Ready(Ok(IdempotencyRejection::Unavailable {
                    retry_after: std::time::Duration::from_secs(1),
                }
                .into_response())),
            },
        }
    }
}
