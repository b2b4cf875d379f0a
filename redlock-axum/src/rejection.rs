//! [`IdempotencyRejection`]: every answer the layer gives instead of the
//! handler's, as an RFC 9457 problem (`application/problem+json`).

use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::key::InvalidKey;

/// The problem types: a `tag:` URI (RFC 4151) per variant, an identifier
/// that is not fetched (RFC 9457, section 3.1.1), documented on the variant.
const TYPE_BASE: &str = "tag:redlock-axum,2026:problem:";

/// An answer the layer gives instead of running the handler.
///
/// Each one is sent as an RFC 9457 problem: `content-type:
/// application/problem+json`, `cache-control: no-store`, and a JSON body
/// with `type`, `title`, `status` and `detail`. The `type` is
/// `tag:redlock-axum,2026:problem:` followed by the variant's name (say
/// `tag:redlock-axum,2026:problem:Processing`): a stable identifier for
/// clients to match on, documented by the variants below, not a link to
/// fetch (RFC 9457 allows both). Change them with
/// [`IdempotencyLayer::map_rejection`](crate::IdempotencyLayer::map_rejection).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum IdempotencyRejection {
    /// `400`: the layer requires a key (`.required()`) and the request
    /// sent none.
    MissingKey {
        /// The header the key is read from, spelled `Idempotency-Key`
        /// (empty when the layer takes keys from an
        /// [`ExtractKey`](crate::ExtractKey) of your own).
        header: String,
    },
    /// `400`: the key is malformed, empty, not ASCII or longer than 255
    /// bytes.
    InvalidKey(InvalidKey),
    /// `500`: the scope function found no scope for the request (typically
    /// no authenticated user in its extensions: the idempotency layer runs
    /// before the authentication layer).
    MissingScope,
    /// A client error chosen with
    /// [`missing_scope_status`](crate::IdempotencyLayer::missing_scope_status)
    /// (say `400`): the scope function found no scope, and the layer was
    /// told that this is the request's fault (a missing tenant header or
    /// credential), not the server's.
    NoOwner {
        /// The status answered.
        status: StatusCode,
    },
    /// `413`: the request body is larger than the layer reads
    /// ([`body_limit`](crate::IdempotencyLayer::body_limit)).
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// `400`: the request body could not be read.
    BodyUnreadable,
    /// `409`: a request with this key is still being processed. Retry after
    /// `Retry-After` seconds.
    Processing {
        /// When to retry: what is left of the first request's lease, at
        /// most the layer's
        /// [`retry_hint`](crate::IdempotencyLayer::retry_hint) (1 s).
        retry_after: Duration,
    },
    /// `422` (configurable): the key was used before with a different
    /// request (method, path, query, content type or body).
    Mismatch {
        /// The status answered.
        status: StatusCode,
    },
    /// `409`: a request with this key completed, but its response was too
    /// large to store; it is not run again and cannot be replayed. The
    /// stored allow-listed headers (such as `location`) are sent along.
    NotReplayable {
        /// The status the first request was answered with.
        original_status: StatusCode,
        /// Its allow-listed headers, without the content headers.
        headers: HeaderMap,
    },
    /// `503`: the idempotency store (Redis) could not be reached, and the
    /// layer fails closed. Retry after `Retry-After` seconds.
    Unavailable {
        /// When to retry.
        retry_after: Duration,
    },
}

/// One row of the table below: what a rejection is, apart from its detail.
struct Row {
    /// The variant's name: the end of its problem type.
    variant: &'static str,
    status: StatusCode,
    title: &'static str,
    /// The `outcome` label of the layer's metric.
    label: &'static str,
}

impl IdempotencyRejection {
    /// Every rejection's status, problem type, title and metric label, in
    /// one place.
    #[rustfmt::skip]
    fn row(&self) -> Row {
        let row = |variant, status, title, label| Row {
            variant,
            status,
            title,
            label,
        };
        use StatusCode as S;
        match self {
            Self::MissingKey { .. } => row("MissingKey", S::BAD_REQUEST, "Idempotency key is missing", "missing"),
            Self::InvalidKey(_) => row("InvalidKey", S::BAD_REQUEST, "Idempotency key is invalid", "invalid"),
            Self::MissingScope => row("MissingScope", S::INTERNAL_SERVER_ERROR, "Idempotency scope is missing", "missing_scope"),
            Self::NoOwner { status } => row("NoOwner", *status, "Request does not say whose it is", "no_owner"),
            Self::BodyTooLarge { .. } => row("BodyTooLarge", S::PAYLOAD_TOO_LARGE, "Request body is too large", "body_too_large"),
            Self::BodyUnreadable => row("BodyUnreadable", S::BAD_REQUEST, "Request body could not be read", "body_unreadable"),
            Self::Processing { .. } => row("Processing", S::CONFLICT, "Request is being processed", "in_progress"),
            Self::Mismatch { status } => row("Mismatch", *status, "Idempotency key reused with a different request", "mismatch"),
            Self::NotReplayable { .. } => row("NotReplayable", S::CONFLICT, "Request already completed", "not_replayable"),
            Self::Unavailable { .. } => row("Unavailable", S::SERVICE_UNAVAILABLE, "Idempotency store unavailable", "store_error"),
        }
    }

    /// The HTTP status answered.
    pub fn status(&self) -> StatusCode {
        self.row().status
    }

    /// The problem's `type`: `tag:redlock-axum,2026:problem:` and the
    /// variant's name.
    pub fn problem_type(&self) -> String {
        format!("{TYPE_BASE}{}", self.row().variant)
    }

    /// The problem's `title`: a short summary, the same for every instance.
    pub fn title(&self) -> &'static str {
        self.row().title
    }

    /// The `outcome` label of the layer's metric for this rejection.
    pub(crate) fn metric_label(&self) -> &'static str {
        self.row().label
    }

    /// The problem's `detail`: what happened and what to do.
    pub fn body_text(&self) -> String {
        match self {
            Self::MissingKey { header } => {
                let what = if header.is_empty() {
                    "an idempotency key".to_owned()
                } else {
                    format!("an `{header}` header")
                };
                format!(
                    "this endpoint requires {what}: send a unique value (a UUID) per operation, \
                     and the same value when retrying it"
                )
            }
            Self::InvalidKey(e) => format!(
                "{}; send 1 to 255 printable ASCII characters, bare or as a quoted string",
                e.reason
            ),
            Self::MissingScope => "the server could not tell whose request this is, so it \
                 cannot check its idempotency key; this is a server configuration error"
                .to_owned(),
            Self::NoOwner { .. } => "this request does not say whose it is (a credential or \
                 header this endpoint needs is missing), so its idempotency key cannot be \
                 checked; send it and retry with the same key"
                .to_owned(),
            Self::BodyTooLarge { limit } => format!(
                "the request body is larger than {limit} bytes, the most this endpoint accepts"
            ),
            Self::BodyUnreadable => {
                "the request body could not be read completely; send the request again".to_owned()
            }
            Self::Processing { retry_after } => format!(
                "a request with this idempotency key is still processing; retry in {} s to get \
                 its result",
                retry_secs(*retry_after)
            ),
            Self::Mismatch { .. } => "this idempotency key was already used with a different \
                 request (method, path, query, content type or body); use a new key for a new \
                 operation"
                .to_owned(),
            Self::NotReplayable {
                original_status, ..
            } => format!(
                "a request with this idempotency key already completed with status {}, but its \
                 response was too large to store, so it cannot be replayed; it will not run again",
                original_status.as_u16()
            ),
            Self::Unavailable { retry_after } => format!(
                "the idempotency store cannot be reached, so the request was not processed; \
                 retry in {} s with the same idempotency key",
                retry_secs(*retry_after)
            ),
        }
    }

    /// `Retry-After`, for the answers that have one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Processing { retry_after } | Self::Unavailable { retry_after } => {
                Some(*retry_after)
            }
            _ => None,
        }
    }
}

/// Whole seconds, rounded up, at least 1.
pub(crate) fn retry_secs(d: Duration) -> u64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1)
}

impl IntoResponse for IdempotencyRejection {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = serde_json::json!({
            "type": self.problem_type(),
            "title": self.title(),
            "status": status.as_u16(),
            "detail": self.body_text(),
        });
        if let Self::NotReplayable {
            original_status, ..
        } = &self
        {
            body["original_status"] = original_status.as_u16().into();
        }
        let mut response = Response::new(Body::from(body.to_string()));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        if let Self::NotReplayable {
            headers: stored, ..
        } = &self
        {
            for (name, value) in stored {
                headers.append(name.clone(), value.clone());
            }
        }
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(after) = self.retry_after() {
            headers.insert(RETRY_AFTER, HeaderValue::from(retry_secs(after)));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_key_is_told_what_to_send_once() {
        let empty = crate::key::validate("").expect_err("empty");
        let body = IdempotencyRejection::InvalidKey(empty).body_text();
        assert_eq!(
            body,
            "the key is empty; send 1 to 255 printable ASCII characters, bare or as a quoted \
             string"
        );
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_secs(Duration::ZERO), 1);
        assert_eq!(retry_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_secs(Duration::from_millis(1000)), 1);
        assert_eq!(retry_secs(Duration::from_millis(29_001)), 30);
    }

    #[test]
    fn processing_is_a_409_problem_with_retry_after() {
        let r = IdempotencyRejection::Processing {
            retry_after: Duration::from_millis(2_500),
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::CONFLICT);
        assert_eq!(r.headers()[CONTENT_TYPE], "application/problem+json");
        assert_eq!(r.headers()[CACHE_CONTROL], "no-store");
        assert_eq!(r.headers()[RETRY_AFTER], "3");
    }

    #[test]
    fn problem_types_are_tag_uris_not_links_that_do_not_resolve() {
        let r = IdempotencyRejection::Processing {
            retry_after: Duration::from_secs(1),
        };
        assert_eq!(r.problem_type(), "tag:redlock-axum,2026:problem:Processing");
        assert!(!r.problem_type().contains("docs.rs"));
    }
}
