//! [`IdempotencyContext`]: what the handler (and outer layers) can know
//! about the idempotent request, and its extractor.

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;

/// Put in the request's extensions before the handler runs, and in the
/// response's extensions of every request the layer ran or replayed.
///
/// A handler takes it as an extractor (or as `Extension<IdempotencyContext>`).
/// Absent when the layer let the request through without idempotency (a
/// method it does not cover, no key, or the store unavailable with
/// `fail_open`): take `Option<IdempotencyContext>` in handlers that may see
/// such requests. Taken where the layer did not run at all (it is missing
/// from the route), the extractor answers `500` with a body that says so
/// (see [`MissingIdempotencyContext`]), not axum's generic "Missing request
/// extension".
///
/// ```
/// use redlock_axum::IdempotencyContext;
///
/// async fn create_order(idem: IdempotencyContext) -> String {
///     // Pass the fencing token to the database: it rejects a write from a
///     // request whose lease ran out and passed to a retry.
///     format!("fence {}", idem.fencing_token())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyContext {
    pub(crate) key_hash: String,
    pub(crate) fencing_token: u64,
    pub(crate) replayed: bool,
    pub(crate) derived: bool,
}

impl IdempotencyContext {
    /// The hash of the client's key (128 bits of SHA-256, hex): safe to log,
    /// unlike the key.
    pub fn key_hash(&self) -> &str {
        &self.key_hash
    }

    /// The fencing token of this run of the handler: strictly increasing
    /// for each claim of one key (within the record's retention). `0` on a
    /// replayed response.
    ///
    /// Not async, unlike [`LockGuard::fencing_token`](redlock_runtime::LockGuard::fencing_token):
    /// a record's claim runs a script anyway, and issues the token in it,
    /// so it is known before the handler runs.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// True on a response replayed from the store (the handler did not run).
    pub fn replayed(&self) -> bool {
        self.replayed
    }

    /// True when the key was derived from the request (no key was sent).
    pub fn derived(&self) -> bool {
        self.derived
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyContext {
    type Rejection = MissingIdempotencyContext;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        (parts.extensions.get::<IdempotencyContext>().cloned()).ok_or(MissingIdempotencyContext)
    }
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for IdempotencyContext {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<IdempotencyContext>().cloned())
    }
}

/// The rejection of the [`IdempotencyContext`] extractor on a request
/// without one: `500`, saying that the route is not behind an
/// `IdempotencyLayer` (or that the layer let this request through without
/// idempotency, in which case take `Option<IdempotencyContext>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "no IdempotencyContext for this request: the route is not behind an IdempotencyLayer (add \
     `.layer(IdempotencyLayer::..)` to it), or the layer let the request through without \
     idempotency (a method it does not cover, no key, or fail_open): take \
     `Option<IdempotencyContext>` in handlers that may see such requests"
)]
pub struct MissingIdempotencyContext;

impl IntoResponse for MissingIdempotencyContext {
    fn into_response(self) -> Response {
        tracing::error!(target: crate::TARGET, "{self}");
        (StatusCode::INTERNAL_SERVER_ERROR, self.to_string()).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> Parts {
        http::Request::new(()).into_parts().0
    }

    #[tokio::test]
    async fn the_extractor_names_the_missing_layer() {
        let mut bare = parts();
        let missing =
            <IdempotencyContext as FromRequestParts<()>>::from_request_parts(&mut bare, &())
                .await
                .expect_err("no layer ran");
        let response = missing.into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .expect("body");
        let body = String::from_utf8_lossy(&body);
        assert!(body.contains("IdempotencyLayer"), "{body}");
        assert!(body.contains("Option<IdempotencyContext>"), "{body}");
        let optional = <IdempotencyContext as OptionalFromRequestParts<()>>::from_request_parts(
            &mut bare,
            &(),
        )
        .await;
        assert_eq!(optional, Ok(None));

        let context = IdempotencyContext {
            key_hash: "ab".to_owned(),
            fencing_token: 7,
            replayed: false,
            derived: false,
        };
        let mut run = parts();
        run.extensions.insert(context.clone());
        let got = <IdempotencyContext as FromRequestParts<()>>::from_request_parts(&mut run, &())
            .await
            .expect("the layer ran");
        assert_eq!(got, context);
    }
}
