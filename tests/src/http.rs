//! A small HTTP/1.1 client for end-to-end tests (and an axum app served on
//! a loopback port to point it at).
//!
//! Every call is bounded (10 s) and reads the whole response. [`send`]
//! uses a fresh connection per request; a [`Connection`] keeps one open
//! for many requests (a load generator, a client that must not reconnect).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// How long a request may take, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What went wrong sending a request: connecting, HTTP, or no response
/// within [`TIMEOUT`].
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

impl Reply {
    /// The header `name`, if present.
    ///
    /// # Panics
    /// When its value is not visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("an ASCII header value"))
    }

    /// `Idempotent-Replayed: true`: the idempotency layer replayed it.
    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    ///
    /// # Panics
    /// When the body is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.body))
    }
}

/// A request builder for `method` `http://{addr}{path}` with its `host`
/// header set.
pub fn request(method: Method, addr: SocketAddr, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
}

/// A `POST` to `path` with a JSON body and, if given, an `Idempotency-Key`
/// (raw bytes, so tests can send invalid ones).
///
/// # Panics
/// When `key` cannot be a header value.
pub fn post(addr: SocketAddr, path: &str, key: Option<&[u8]>, body: &str) -> Request<Full<Bytes>> {
    let mut req = request(Method::POST, addr, path).header("content-type", "application/json");
    if let Some(key) = key {
        req = req.header(
            "idempotency-key",
            http::HeaderValue::from_bytes(key).expect("a header value"),
        );
    }
    req.body(Full::new(Bytes::from(body.to_owned())))
        .expect("a valid request")
}

/// A `GET` of `path`.
pub fn get(addr: SocketAddr, path: &str) -> Request<Full<Bytes>> {
    request(Method::GET, addr, path)
        .body(Full::new(Bytes::new()))
        .expect("a valid request")
}

/// Sends `req` on a fresh connection to `addr` and reads the whole
/// response, within [`TIMEOUT`].
///
/// # Errors
/// When `addr` cannot be reached, the connection fails or closes before a
/// response, or nothing comes within [`TIMEOUT`].
pub async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Result<Reply, Error> {
    tokio::time::timeout(TIMEOUT, async {
        Connection::open(addr).await?.call(req).await
    })
    .await
    .map_err(|_| format!("no response from {addr} within {TIMEOUT:?}"))?
}

/// [`post`], [`send`], and a panic on a transport error.
///
/// # Panics
/// When the request gets no response.
pub async fn post_ok(addr: SocketAddr, path: &str, key: Option<&str>, body: &str) -> Reply {
    send(addr, post(addr, path, key.map(str::as_bytes), body))
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// One kept-open HTTP/1.1 connection: requests on it go one at a time.
#[derive(Debug)]
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    task: JoinHandle<()>,
}

impl Connection {
    /// Connects to `addr` and does the HTTP/1.1 handshake.
    ///
    /// # Errors
    /// When `addr` cannot be reached.
    pub async fn open(addr: SocketAddr) -> Result<Connection, Error> {
        let stream = TcpStream::connect(addr).await?;
        // Requests are small and answered one at a time: no Nagle delay.
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        // Ends with the connection (or when this handle is dropped).
        let task = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Connection { sender, task })
    }

    /// Sends `req` and reads the whole response. Not bounded in time: wrap
    /// it in a timeout, or use [`send`].
    ///
    /// # Errors
    /// When the connection fails or closes before a whole response.
    pub async fn call(&mut self, req: Request<Full<Bytes>>) -> Result<Reply, Error> {
        self.sender.ready().await?;
        let response = self.sender.send_request(req).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An axum app served on `127.0.0.1:<free port>` until dropped.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `app` on a free loopback port.
///
/// # Panics
/// When no loopback port can be bound.
pub async fn serve(app: axum::Router) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Server { addr, task }
}
