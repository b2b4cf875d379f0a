//! Shared by the idempotency suites: the harness's server on a loopback
//! port and HTTP/1.1 client (`redlock_tests::http`), plus a handler whose
//! runs are counted and can be held at a gate.

#![allow(dead_code, unreachable_pub, unused_imports)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

pub use redlock_tests::http::{Reply, Server, post, post_ok, send, serve};

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
