//! A small HTTP/1.1 client for the order service: what the demo and the
//! `order_service` test send.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

/// What can go wrong sending a request: connecting, HTTP, or no answer
/// within 10 s.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Its status.
    pub status: StatusCode,
    /// `Idempotent-Replayed: true`: the idempotency layer replayed it.
    pub replayed: bool,
    /// Its `Retry-After`, if any.
    pub retry_after: Option<String>,
    /// Its body, as text.
    pub body: String,
}

/// `POST /orders` as `user`, with an `Idempotency-Key` and a JSON body.
///
/// # Errors
/// When the service cannot be reached or does not answer within 10 s.
pub async fn post_order(
    addr: SocketAddr,
    user: &str,
    key: &str,
    body: &str,
) -> Result<Reply, Error> {
    let req = Request::post(format!("http://{addr}/orders"))
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("x-user", user)
        .header("idempotency-key", key)
        .body(Full::new(Bytes::from(body.to_owned())))?;
    send(addr, req).await
}

/// `GET path`.
///
/// # Errors
/// As [`post_order`].
pub async fn get(addr: SocketAddr, path: &str) -> Result<Reply, Error> {
    let req = Request::get(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
        .body(Full::new(Bytes::new()))?;
    send(addr, req).await
}

/// Sends `req` on a new connection and reads the whole answer (10 s at most).
async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Result<Reply, Error> {
    let call = async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let response = sender.send_request(req).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Ok::<_, Error>(Reply {
            status: parts.status,
            replayed: header("idempotent-replayed").as_deref() == Some("true"),
            retry_after: header("retry-after"),
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    };
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .map_err(|_| "no answer within 10 s")?
}
