//! A `rediss://` URL that points at a plain-text port: the server reads the
//! TLS handshake as the start of an inline command that never ends (its
//! bytes hold a NUL before any newline), answers nothing, and the connect
//! times out just as one to a paused server would. A plain-text `PING` to
//! the port tells the two apart: a Redis or Sentinel that answers it
//! (`+PONG`, or `-NOAUTH` when it wants a password) speaks no TLS on that
//! port, which no retry changes, so the failure is
//! [`ConnectFailure::Tls`](crate::ConnectFailure::Tls) and fails at once.
//!
//! The probe is sent only after a TLS connect timed out, and carries
//! nothing but `PING`: no password travels in plain text.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest a probe may take: connect, `PING`, the first byte back.
const PROBE_LIMIT: Duration = Duration::from_millis(500);

/// The plain-text probe of one `rediss://` server's port, and what it found.
#[derive(Debug, Clone)]
pub(crate) struct PlainTextProbe(Arc<Probe>);

#[derive(Debug)]
struct Probe {
    host: String,
    port: u16,
    /// Set when the port answered in plain text; cleared once a TLS
    /// connection is made.
    found: Mutex<Option<String>>,
    /// Set while a probe runs.
    running: AtomicBool,
}

impl PlainTextProbe {
    /// The probe of `info`'s server when it is reached over TLS.
    pub(crate) fn of(info: &redis::ConnectionInfo) -> Option<Self> {
        match info.addr() {
            redis::ConnectionAddr::TcpTls { host, port, .. } => Some(Self(Arc::new(Probe {
                host: host.clone(),
                port: *port,
                found: Mutex::new(None),
                running: AtomicBool::new(false),
            }))),
            _ => None,
        }
    }

    /// What an earlier probe found: the error's detail, when the port
    /// answered in plain text.
    pub(crate) fn found(&self) -> Option<String> {
        self.0
            .found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A TLS connection was made: what was found no longer holds.
    pub(crate) fn forget(&self) {
        self.0
            .found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Starts [`run`](Self::run) in the background: what it finds is kept
    /// for the next caller.
    pub(crate) fn start(&self) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let probe = self.clone();
            runtime.spawn(async move {
                let _ = probe.run().await;
            });
        }
    }

    /// Probes the port, unless an earlier probe found it plain already,
    /// and resolves with what was found: the error's detail when the port
    /// answered in plain text. `None` when it did not, when another probe
    /// of it is running (its finding is kept for the next call), or
    /// outside a tokio runtime.
    ///
    /// The probe runs in a task of its own, so a caller that gives up (a
    /// call's time limit) does not cut it short.
    pub(crate) async fn run(&self) -> Option<String> {
        if let Some(found) = self.found() {
            return Some(found);
        }
        if self.0.running.swap(true, Ordering::AcqRel) {
            return None;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.0.running.store(false, Ordering::Release);
            return None;
        };
        let probe = Arc::clone(&self.0);
        let task = runtime.spawn(async move {
            if answers_plain_text(&probe.host, probe.port).await {
                tracing::debug!(target: "redlock", host = %probe.host, port = probe.port, "a rediss:// server answered a plain-text PING: its port is not TLS");
                *probe.found.lock().unwrap_or_else(PoisonError::into_inner) = Some(format!(
                    "{}:{} answered a plain-text PING, so that port does not speak TLS; use a \
                     `redis://` URL for it, or the server's TLS port (`tls-port`)",
                    probe.host, probe.port
                ));
            }
            probe.running.store(false, Ordering::Release);
        });
        // A failed task found nothing.
        let _ = task.await;
        self.found()
    }
}

/// Whether the server at `host:port` answers a plain-text `PING` with a
/// RESP reply (`+PONG`, or an error such as `-NOAUTH`) within
/// [`PROBE_LIMIT`]. A TLS port drops the connection (or sends a TLS
/// alert), and a silent server sends nothing: both are `false`.
async fn answers_plain_text(host: &str, port: u16) -> bool {
    let probe = async {
        let mut stream = TcpStream::connect((host, port)).await?;
        stream.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
        let mut first = [0u8; 1];
        let read = stream.read(&mut first).await?;
        Ok::<_, std::io::Error>(read == 1 && matches!(first[0], b'+' | b'-'))
    };
    matches!(tokio::time::timeout(PROBE_LIMIT, probe).await, Ok(Ok(true)))
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::answers_plain_text;

    /// A loopback server that reads a request and answers `reply` (nothing
    /// when it is empty), then keeps the connection open.
    async fn server(reply: &'static [u8]) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let task = tokio::spawn(async move {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut request = [0u8; 64];
            let _ = stream.read(&mut request).await;
            if !reply.is_empty() {
                let _ = stream.write_all(reply).await;
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_resp_reply_is_plain_text_and_silence_or_tls_is_not() {
        for (reply, plain) in [
            (b"+PONG\r\n".as_slice(), true),
            (b"-NOAUTH Authentication required.\r\n".as_slice(), true),
            // A TLS alert record.
            (b"\x15\x03\x01\x00\x02\x02\x46".as_slice(), false),
            // Silence.
            (b"".as_slice(), false),
        ] {
            let (addr, task) = server(reply).await;
            assert_eq!(
                answers_plain_text("127.0.0.1", addr.port()).await,
                plain,
                "{reply:?}"
            );
            task.abort();
        }
    }
}
