//! Redlock: one lock over N independent Redis masters, held while a
//! majority of them hold it.
//!
//! - **Acquire** sends the acquire script to every node at once, each with a
//!   per-node timeout that is small against the ttl, and stops listening as
//!   soon as a majority granted (or so many refused that none can). The lock
//!   is held when a majority granted and the validity `ttl - elapsed -
//!   drift` (drift: `ttl / 100 + 2 ms`) is still positive; otherwise it is
//!   released on every node that may hold it, and the caller's wait and
//!   retry policy applies.
//! - **Fencing**: each node issues its own token as it grants (at least its
//!   counter + 1 and its clock in microseconds); the token is the largest
//!   of the granting majority, and the release raises every node's counter
//!   to it. The argument, with its assumptions, is in `design`
//!   ("Fencing tokens"). A node whose ACL refuses the script grants a
//!   plain lock without one, and the lock then has no token (see
//!   `backend/quorum.rs`).
//! - **Extend** needs a majority; **release** goes to every node; a dropped
//!   acquire is given back everywhere ([`QuorumBackend::give_back`]).
//! - With a **restart delay**, a node grants nothing until the delay has
//!   passed since it started (read from its uptime on each new connection),
//!   so it cannot help a second owner to a majority while the first still
//!   holds the lock elsewhere.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::server::RedisBackend;
use super::{NodePing, OpError};
use crate::error::{ConnectFailure, QuorumDetail};
use votes::{Answer, Tally, detail};

pub(crate) mod votes;

/// One Redis master of the quorum.
pub(crate) struct Node {
    pub(crate) backend: RedisBackend,
    /// The node's URL with its password redacted, for errors.
    pub(crate) name: String,
    /// The node's last refusal of the acquire script (an ACL's `NOPERM`)
    /// and when it came: see `backend/quorum.rs`, "Without scripts".
    refused_script: Mutex<Option<(Instant, redis::RedisError)>>,
}

impl Node {
    pub(crate) fn new(backend: RedisBackend, name: String) -> Self {
        Self {
            backend,
            name,
            refused_script: Mutex::new(None),
        }
    }

    fn refusal(&self) -> std::sync::MutexGuard<'_, Option<(Instant, redis::RedisError)>> {
        self.refused_script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers that the node refused the acquire script with `e`.
    pub(crate) fn refused_script(&self, e: redis::RedisError) {
        *self.refusal() = Some((Instant::now(), e));
    }

    /// Whether the node refused the acquire script less than `within` ago.
    pub(crate) fn refuses_scripts(&self, within: Duration) -> bool {
        self.refusal()
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < within)
    }

    /// The node's last refusal of the acquire script, however old.
    pub(crate) fn script_refusal(&self) -> Option<redis::RedisError> {
        self.refusal().as_ref().map(|(_, e)| e.clone())
    }
}

pub(crate) struct QuorumBackend {
    pub(crate) nodes: Box<[Arc<Node>]>,
    pub(crate) quorum: usize,
    pub(crate) node_timeout: Duration,
    /// Acquire commands still on their way to a node after the acquire
    /// returned, by owner token: a release waits for them, or one landing
    /// after it would leave the lock behind on that node.
    in_flight: InFlight,
}

type InFlight = Arc<Mutex<HashMap<Arc<str>, Arc<tokio::sync::watch::Sender<usize>>>>>;

/// One acquire's commands in flight; each node's task drops a clone when
/// its command is answered (or given up).
#[derive(Clone)]
pub(crate) struct Tracker {
    registry: InFlight,
    token: Arc<str>,
    counter: Arc<tokio::sync::watch::Sender<usize>>,
}

/// Marks one node's acquire command as finished when dropped.
pub(crate) struct Landed(pub(crate) Tracker);

impl Drop for Landed {
    fn drop(&mut self) {
        let t = &self.0;
        let mut registry = t.registry.lock().unwrap_or_else(PoisonError::into_inner);
        t.counter.send_modify(|c| *c = c.saturating_sub(1));
        if *t.counter.borrow() == 0
            && registry
                .get(&t.token)
                .is_some_and(|current| Arc::ptr_eq(current, &t.counter))
        {
            registry.remove(&t.token);
        }
    }
}

impl fmt::Debug for QuorumBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuorumBackend")
            .field(
                "nodes",
                &self.nodes.iter().map(|n| &n.name).collect::<Vec<_>>(),
            )
            .field("quorum", &self.quorum)
            .field("node_timeout", &self.node_timeout)
            .finish()
    }
}

/// Redlock's allowance for clock drift between the nodes: 1 % of the ttl
/// plus 2 ms. It must cover, over one lease, the client's clock running
/// slow and a node's running fast together: each within it alone is not
/// enough (`model/tests/redlock.rs`,
/// `the_margin_must_cover_the_clients_drift_and_a_nodes_together`).
pub(crate) fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

impl QuorumBackend {
    /// Pings every node at once.
    pub(crate) async fn ping(&self, limit: Duration) -> Vec<NodePing> {
        let pings = self
            .nodes
            .iter()
            .map(|node| async move { (node.name.clone(), node.backend.ping(limit).await) });
        futures_util::future::join_all(pings).await
    }

    pub(crate) fn new(nodes: Vec<Node>, node_timeout: Duration) -> Self {
        let quorum = nodes.len() / 2 + 1;
        Self {
            nodes: nodes.into_iter().map(Arc::new).collect(),
            quorum,
            node_timeout,
            in_flight: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Runs `op` on the nodes in `which` at once, each within `per_node`,
    /// and collects the answers until `done` says enough is known (the
    /// nodes not heard from by then stay `None`).
    pub(crate) async fn fan_out<'a, T, F, Fut>(
        &'a self,
        which: impl Iterator<Item = usize>,
        op: F,
        mut done: impl FnMut(&[Option<Answer<T>>]) -> bool,
    ) -> Vec<Option<Answer<T>>>
    where
        F: Fn(&'a Node) -> Fut,
        Fut: Future<Output = Answer<T>>,
    {
        let mut answers: Vec<Option<Answer<T>>> = (0..self.nodes.len()).map(|_| None).collect();
        let mut pending: FuturesUnordered<_> = which
            .map(|i| {
                let fut = op(&self.nodes[i]);
                async move { (i, fut.await) }
            })
            .collect();
        while let Some((i, answer)) = pending.next().await {
            answers[i] = Some(answer);
            if done(&answers) {
                break;
            }
        }
        answers
    }

    /// As [`fan_out`](Self::fan_out), but each node's operation runs as a
    /// task of its own: once enough is known, the nodes not heard from yet
    /// still get the command (an acquire or renewal that lands late makes
    /// the lock sturdier, not weaker; release goes to every node anyway).
    pub(crate) async fn fan_out_detached<T, F, Fut>(
        &self,
        op: F,
        mut done: impl FnMut(&[Option<Answer<T>>]) -> bool,
    ) -> Vec<Option<Answer<T>>>
    where
        F: Fn(Arc<Node>) -> Fut,
        Fut: Future<Output = Answer<T>> + Send + 'static,
        T: Send + 'static,
    {
        let mut answers: Vec<Option<Answer<T>>> = (0..self.nodes.len()).map(|_| None).collect();
        let mut pending: FuturesUnordered<_> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let task = tokio::spawn(super::server::resend::carry(op(Arc::clone(node))));
                async move { (i, task.await) }
            })
            .collect();
        while let Some((i, answer)) = pending.next().await {
            answers[i] =
                Some(answer.unwrap_or_else(|e| Answer::Failed(format!("task failed: {e}"))));
            if done(&answers) {
                break;
            }
        }
        answers
    }

    /// Counts `n` acquire commands for `token` as in flight.
    pub(crate) fn track(&self, token: &Arc<str>, n: usize) -> Tracker {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let counter = in_flight
            .entry(Arc::clone(token))
            .or_insert_with(|| Arc::new(tokio::sync::watch::Sender::new(0)));
        counter.send_modify(|c| *c += n);
        Tracker {
            registry: Arc::clone(&self.in_flight),
            token: Arc::clone(token),
            counter: Arc::clone(counter),
        }
    }

    /// Waits (bounded by the per-node timeout) until no acquire command of
    /// `token` is on its way to a node.
    pub(crate) async fn settle(&self, token: &str) {
        let counter = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(token)
            .cloned();
        if let Some(counter) = counter {
            let mut rx = counter.subscribe();
            let _ = tokio::time::timeout(
                self.node_timeout * 2 + Duration::from_millis(50),
                rx.wait_for(|c| *c == 0),
            )
            .await;
        }
    }

    pub(crate) fn failure<T>(&self, answers: &[Option<Answer<T>>]) -> QuorumDetail {
        detail(
            answers,
            self.nodes.iter().map(|n| n.name.as_str()),
            self.quorum,
        )
    }

    pub(crate) fn per_node(&self, limit: Duration) -> Duration {
        self.node_timeout.min(limit).max(Duration::from_millis(1))
    }

    /// Each node's backend and name.
    pub(crate) fn nodes(&self) -> Vec<(&RedisBackend, &str)> {
        self.nodes
            .iter()
            .map(|n| (&n.backend, n.name.as_str()))
            .collect()
    }

    /// At least a majority of the nodes answer.
    pub(crate) async fn check(&self) -> Result<(), OpError> {
        let answers = self
            .fan_out(
                0..self.nodes.len(),
                |node| async move {
                    match node.backend.check().await {
                        Ok(()) => Answer::Yes(None),
                        Err(e) => {
                            let (failure, detail) = e.connect_failure();
                            Answer::Yes(Some((failure, detail)))
                        }
                    }
                },
                |_| false,
            )
            .await;
        // Every node answered (a failure is an answer here): sort them.
        let mut failures = Vec::new();
        let answers: Vec<Option<Answer<()>>> = answers
            .into_iter()
            .map(|answer| {
                answer.map(|answer| match answer {
                    Answer::Yes(None) => Answer::Yes(()),
                    Answer::Yes(Some((failure, detail))) => {
                        failures.push(failure);
                        Answer::Failed(format!("{failure} ({detail})"))
                    }
                    Answer::No(left) => Answer::No(left),
                    Answer::Failed(e) => Answer::Failed(e),
                })
            })
            .collect();
        if Tally::of(&answers).yes >= self.quorum {
            return Ok(());
        }
        // Permanent when the nodes that failed for good leave no majority;
        // else the failed nodes' reason when they agree on one.
        Err(OpError::Connect {
            failure: ConnectFailure::of_servers(&failures, self.nodes.len() - self.quorum),
            detail: self.failure(&answers).to_string(),
        })
    }
}
