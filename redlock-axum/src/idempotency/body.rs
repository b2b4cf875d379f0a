//! What is stored and replayed: the handler's response read up to the
//! store limit (delivered whole to the first client either way), the
//! allow-listed headers kept with it, and the headers a problem answer
//! drops.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body as HttpBody, Frame};
use http_body_util::BodyExt;
use pin_project_lite::pin_project;

use super::config::Config;
use crate::store::Stored;
use crate::{BoxError, TARGET};

/// What to do with the handler's response.
pub(crate) enum Captured {
    /// Store (replayable, or too large: body `None`), then send.
    Store { stored: Stored, response: Response },
    /// Release the key, then send.
    Release { response: Response },
}

/// Reads the response body up to the store limit, if the status is stored.
pub(crate) async fn take_response<B>(response: Response<B>, config: &Config) -> Captured
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    let mut body = Body::new(body);
    if !(config.store_if)(parts.status) {
        return Captured::Release {
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
                    return Captured::Store {
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
                return Captured::Store {
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
    Captured::Store {
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
pub(crate) trait RetainContentFree {
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
    use http::{HeaderValue, StatusCode};
    use http_body_util::StreamBody;

    fn config(store_limit: usize) -> Config {
        crate::IdempotencyLayer::global(redlock_runtime::LockClient::in_memory())
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
        let Captured::Store { stored, response } = taken else {
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
        let Captured::Store { stored, .. } = take_response(gzip, &config).await else {
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
        let Captured::Store { stored, response } = taken else {
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
        let Captured::Store { stored, response } = taken else {
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
        let Captured::Store { stored, response } = taken else {
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
                matches!(taken, Captured::Release { .. }),
                "{status} must release the key"
            );
        }
        for status in [200, 201, 204, 400, 404, 422] {
            let status = StatusCode::from_u16(status).expect("status");
            let taken = take_response(response(status, vec![data("x")]), &config(64)).await;
            assert!(
                matches!(taken, Captured::Store { .. }),
                "{status} must be stored"
            );
        }
    }
}
