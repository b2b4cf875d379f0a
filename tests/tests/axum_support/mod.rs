//! Shared by the idempotency suites: a server on a loopback port and a
//! small HTTP/1.1 client (one connection per request), plus a handler
//! whose runs are counted and can be held at a gate.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

/// An axum app served on `127.0.0.1:<free port>` until dropped.
pub struct Server {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn serve(app: Router) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Server { addr, task }
}

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ascii header"))
    }

    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }
}

/// Sends one request on a fresh connection and reads the whole response.
/// Bounded: 10 s.
pub async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Result<Reply, String> {
    let call = async {
        let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let response = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    };
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .map_err(|_| "no response within 10 s".to_owned())?
}

/// A POST to `path` with a JSON body and, if given, an `Idempotency-Key`.
pub fn post(addr: SocketAddr, path: &str, key: Option<&[u8]>, body: &str) -> Request<Full<Bytes>> {
    let mut req = Request::post(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    if let Some(key) = key {
        req = req.header(
            "idempotency-key",
            http::HeaderValue::from_bytes(key).expect("a header value"),
        );
    }
    req.body(Full::new(Bytes::from(body.to_owned())))
        .expect("request")
}

/// Sends a POST and panics on a transport error.
pub async fn post_ok(addr: SocketAddr, path: &str, key: Option<&str>, body: &str) -> Reply {
    send(addr, post(addr, path, key.map(str::as_bytes), body))
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// Counts handler runs; with a gate, each run waits for a permit, and
/// announces itself on `started` first.
#[derive(Clone)]
pub struct Probe {
    pub runs: Arc<AtomicUsize>,
    pub gate: Option<Arc<Semaphore>>,
    pub started: mpsc::UnboundedSender<usize>,
    pub finished: mpsc::UnboundedSender<usize>,
}

pub struct ProbeEvents {
    pub started: mpsc::UnboundedReceiver<usize>,
    pub finished: mpsc::UnboundedReceiver<usize>,
}

impl ProbeEvents {
    pub async fn started(&mut self) -> usize {
        tokio::time::timeout(Duration::from_secs(10), self.started.recv())
            .await
            .expect("a handler started within 10 s")
            .expect("probe alive")
    }

    pub async fn finished(&mut self) -> usize {
        tokio::time::timeout(Duration::from_secs(10), self.finished.recv())
            .await
            .expect("a handler finished within 10 s")
            .expect("probe alive")
    }
}

impl Probe {
    pub fn new(gated: bool) -> (Self, ProbeEvents) {
        let (started_tx, started) = mpsc::unbounded_channel();
        let (finished_tx, finished) = mpsc::unbounded_channel();
        (
            Self {
                runs: Arc::new(AtomicUsize::new(0)),
                gate: gated.then(|| Arc::new(Semaphore::new(0))),
                started: started_tx,
                finished: finished_tx,
            },
            ProbeEvents { started, finished },
        )
    }

    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Lets `n` held runs go on.
    pub fn open(&self, n: usize) {
        if let Some(gate) = &self.gate {
            gate.add_permits(n);
        }
    }

    /// Called first thing in a handler: counts the run, announces it, and
    /// waits at the gate.
    pub async fn enter(&self) -> usize {
        let n = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.started.send(n);
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate open").forget();
        }
        n
    }

    pub fn leave(&self, n: usize) {
        let _ = self.finished.send(n);
    }
}

/// A raw connection to the test Redis.
pub async fn raw_redis(url: &str) -> redis::aio::MultiplexedConnection {
    redlock_tests::raw_connection(url).await
}
