//! A small HTTP/1.1 client for the order service: what the demo and the
//! `order_service` test send.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use redlock_tests::http as http_client;

/// What can go wrong sending a request: connecting, HTTP, or no answer
/// within 10 s.
pub type Error = http_client::Error;

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

/// Sends `req` on a new connection and reads the whole answer (10 s at
/// most), through the workspace's one HTTP/1 client (`redlock_tests::http`).
async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Result<Reply, Error> {
    let reply = http_client::send(addr, req).await?;
    Ok(Reply {
        status: reply.status,
        replayed: reply.replayed(),
        retry_after: reply.header("retry-after").map(str::to_owned),
        body: reply.text(),
    })
}
