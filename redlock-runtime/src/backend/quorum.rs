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
//!   ("Fencing tokens").
//! - **Extend** needs a majority; **release** goes to every node; a dropped
//!   acquire is given back everywhere ([`QuorumBackend::give_back`]).
//! - With a **restart delay**, a node grants nothing until the delay has
//!   passed since it started (read from its uptime on each new connection),
//!   so it cannot help a second owner to a majority while the first still
//!   holds the lock elsewhere.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::redis::RedisBackend;
use super::votes::{Answer, Tally, detail};
use super::{Acquire, AcquireReply, End, Ended, GiveBack, Keys, NodePing, OpError, Renewal};
use crate::error::{ConnectFailure, QuorumDetail};
mod force;
mod inspect;

/// One Redis master of the quorum.
pub(crate) struct Node {
    pub(crate) backend: RedisBackend,
    /// The node's URL with its password redacted, for errors.
    pub(crate) name: String,
}

pub(crate) struct QuorumBackend {
    nodes: Box<[Arc<Node>]>,
    quorum: usize,
    node_timeout: Duration,
    /// Acquire commands still on their way to a node after the acquire
    /// returned, by owner token: a release waits for them, or one landing
    /// after it would leave the lock behind on that node.
    in_flight: InFlight,
}

type InFlight = Arc<Mutex<HashMap<Arc<str>, Arc<tokio::sync::watch::Sender<usize>>>>>;

/// One acquire's commands in flight; each node's task drops a clone when
/// its command is answered (or given up).
#[derive(Clone)]
struct Tracker {
    registry: InFlight,
    token: Arc<str>,
    counter: Arc<tokio::sync::watch::Sender<usize>>,
}

/// Marks one node's acquire command as finished when dropped.
struct Landed(Tracker);

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

/// The clock `hold_at_least` is measured on with Redlock: this process's
/// monotonic clock, in ms since the first use.
fn local_ms() -> u64 {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One node's acquire: granted (with its fencing counter), refused, or
/// failed (including a node still in its restart delay).
async fn acquire_on(
    node: &Node,
    keys: &Keys,
    token: &str,
    ttl: Duration,
    per_node: Duration,
) -> Answer<u64> {
    let request = Acquire {
        keys,
        token,
        ttl,
        want_time: false,
        line: None,
        // Redlock spreads the largest token on release: issued now.
        fenced: true,
        fresh: false,
    };
    match node.backend.acquire(&request, per_node).await {
        Ok(AcquireReply::Acquired { fence, .. }) => Answer::Yes(fence),
        Ok(AcquireReply::Busy { pttl }) => Answer::No(pttl),
        Err(e) => Answer::Failed(e.to_string()),
    }
}

/// Redlock's allowance for clock drift between the nodes: 1 % of the ttl
/// plus 2 ms.
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
    async fn fan_out<'a, T, F, Fut>(
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
    async fn fan_out_detached<T, F, Fut>(
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
                let task = tokio::spawn(super::resend::carry(op(Arc::clone(node))));
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
    fn track(&self, token: &Arc<str>, n: usize) -> Tracker {
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
    async fn settle(&self, token: &str) {
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

    fn failure<T>(&self, answers: &[Option<Answer<T>>]) -> QuorumDetail {
        detail(
            answers,
            self.nodes.iter().map(|n| n.name.as_str()),
            self.quorum,
        )
    }

    fn per_node(&self, limit: Duration) -> Duration {
        self.node_timeout.min(limit).max(Duration::from_millis(1))
    }

    /// Fair mode is refused before this (its line lives in one Redis):
    /// `request.line` is not looked at.
    pub(crate) async fn acquire(
        &self,
        request: &Acquire<'_>,
        limit: Duration,
    ) -> Result<AcquireReply, OpError> {
        let Acquire {
            keys,
            token,
            ttl,
            want_time,
            ..
        } = *request;
        let started = Instant::now();
        // Small against the ttl: a slow node must not eat the validity.
        let per_node = self
            .per_node(limit)
            .min(ttl / 10)
            .max(Duration::from_millis(1));
        let n = self.nodes.len();
        let quorum = self.quorum;
        let (keys_owned, token_owned) = (Arc::new(keys.clone()), Arc::<str>::from(token));
        let tracker = self.track(&token_owned, n);
        let answers = self
            .fan_out_detached(
                |node| {
                    let (keys, token) = (Arc::clone(&keys_owned), Arc::clone(&token_owned));
                    // Dropped with the task, even one that never ran.
                    let landed = Landed(tracker.clone());
                    async move {
                        let _landed = landed;
                        acquire_on(&node, &keys, &token, ttl, per_node).await
                    }
                },
                |answers| Tally::of(answers).settled(n, quorum),
            )
            .await;
        let Tally {
            yes: granted,
            no: refused,
            ..
        } = Tally::of(&answers);

        if granted >= quorum {
            // The token: the largest a granting node issued. No second round
            // trip: the release raises every node's counter to it (see
            // `design`, "Fencing tokens").
            let fence = answers
                .iter()
                .filter_map(|a| match a {
                    Some(Answer::Yes(fence)) => Some(*fence),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            let elapsed = started.elapsed();
            let valid = ttl.saturating_sub(elapsed + drift(ttl));
            if !valid.is_zero() {
                return Ok(AcquireReply::Acquired {
                    fence,
                    at_ms: want_time.then(local_ms),
                });
            }
            let mut failure = self.failure(&answers);
            failure.expired_after = Some(elapsed);
            self.release_where(keys, token, &answers, per_node).await;
            return Err(OpError::Quorum(Box::new(failure)));
        }

        // No majority: give back what was granted (and what may have been,
        // on nodes that did not answer) before the caller retries with the
        // same token.
        self.release_where(keys, token, &answers, per_node).await;
        if refused > n - quorum {
            let pttl = answers
                .iter()
                .filter_map(|a| match a {
                    Some(Answer::No(pttl)) => *pttl,
                    _ => None,
                })
                .min();
            return Ok(AcquireReply::Busy { pttl });
        }
        // Nodes that failed for good (a wrong password, a TLS failure: no
        // connection since): when more than a majority can spare, no retry
        // reaches one, and the error says why instead of being retried for
        // the whole wait.
        let barred: Vec<(&str, ConnectFailure, String)> = answers
            .iter()
            .zip(self.nodes.iter())
            .filter(|(answer, _)| matches!(answer, Some(Answer::Failed(_))))
            .filter_map(|(_, node)| {
                let (failure, detail) = node.backend.permanent_failure()?;
                Some((node.name.as_str(), failure, detail))
            })
            .collect();
        if barred.len() > n - quorum {
            let failures: Vec<ConnectFailure> = barred.iter().map(|&(_, f, _)| f).collect();
            let nodes: Vec<String> = barred
                .iter()
                .map(|(node, failure, detail)| format!("{node}: {failure} ({detail})"))
                .collect();
            return Err(OpError::Connect {
                failure: ConnectFailure::of_servers(&failures, n - quorum),
                detail: format!(
                    "{} of {n} nodes cannot be reached until their settings change, and {quorum} \
                     must agree ({})",
                    barred.len(),
                    nodes.join("; ")
                ),
            });
        }
        Err(OpError::Quorum(Box::new(self.failure(&answers))))
    }

    /// Releases `token` on every node that granted it or may have.
    async fn release_where<T>(
        &self,
        keys: &Keys,
        token: &str,
        answers: &[Option<Answer<T>>],
        per_node: Duration,
    ) {
        self.settle(token).await;
        let which = (0..self.nodes.len())
            .filter(|&i| !matches!(answers[i], Some(Answer::No(_))))
            .collect::<Vec<_>>();
        self.fan_out(
            which.into_iter(),
            |node| async move {
                match node.backend.release(keys, token, 0, per_node).await {
                    Ok(_) => Answer::Yes(()),
                    Err(e) => Answer::Failed(e.to_string()),
                }
            },
            |_| false,
        )
        .await;
    }

    /// `Ok(true)`: a majority confirmed; `Ok(false)`: too many nodes no
    /// longer hold the token for a majority to; else the failure.
    fn verdict<T>(&self, answers: &[Option<Answer<T>>]) -> Result<bool, OpError> {
        Tally::of(answers)
            .verdict(self.nodes.len(), self.quorum)
            .ok_or_else(|| OpError::Quorum(Box::new(self.failure(answers))))
    }

    pub(crate) async fn extend(
        &self,
        renewal: &Renewal<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let Renewal { keys, token, ttl } = *renewal;
        let per_node = self.per_node(limit);
        let (n, quorum) = (self.nodes.len(), self.quorum);
        let (keys_owned, token_owned) = (Arc::new(keys.clone()), Arc::<str>::from(token));
        let answers = self
            .fan_out_detached(
                |node| {
                    let (keys, token) = (Arc::clone(&keys_owned), Arc::clone(&token_owned));
                    async move {
                        let renewal = Renewal {
                            keys: &keys,
                            token: &token,
                            ttl,
                        };
                        match node.backend.extend(&renewal, per_node).await {
                            Ok(true) => Answer::Yes(()),
                            Ok(false) => Answer::No(None),
                            Err(e) => Answer::Failed(e.to_string()),
                        }
                    }
                },
                |answers| Tally::of(answers).settled(n, quorum),
            )
            .await;
        self.verdict(&answers)
    }

    pub(crate) async fn extend_many(
        &self,
        items: &[Renewal<'_>],
        limit: Duration,
    ) -> Result<Vec<Result<bool, OpError>>, OpError> {
        let per_node = self.per_node(limit);
        let per_node_answers = self
            .fan_out(
                0..self.nodes.len(),
                |node| async move {
                    match node.backend.extend_many(items, per_node).await {
                        Ok(each) => Answer::Yes(each),
                        Err(e) => Answer::Failed(e.to_string()),
                    }
                },
                |_| false,
            )
            .await;
        Ok((0..items.len())
            .map(|item| {
                let answers: Vec<Option<Answer<()>>> = per_node_answers
                    .iter()
                    .map(|node| match node {
                        Some(Answer::Yes(each)) => Some(match each.get(item) {
                            Some(Ok(true)) => Answer::Yes(()),
                            Some(Ok(false)) => Answer::No(None),
                            Some(Err(e)) => Answer::Failed(e.to_string()),
                            None => Answer::Failed("no answer".to_owned()),
                        }),
                        Some(Answer::Failed(why)) => Some(Answer::Failed(why.clone())),
                        Some(Answer::No(_)) | None => None,
                    })
                    .collect();
                self.verdict(&answers)
            })
            .collect())
    }

    /// Releases on every node, raising each node's counter to `fence`.
    async fn release(
        &self,
        keys: &Keys,
        token: &str,
        fence: u64,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let per_node = self.per_node(limit);
        self.settle(token).await;
        let answers = self
            .fan_out(
                0..self.nodes.len(),
                |node| async move {
                    match node.backend.release(keys, token, fence, per_node).await {
                        Ok(true) => Answer::Yes(()),
                        Ok(false) => Answer::No(None),
                        Err(e) => Answer::Failed(e.to_string()),
                    }
                },
                |_| false,
            )
            .await;
        self.verdict(&answers)
    }

    /// Gives back an acquire that returned no guard: once its commands
    /// still on their way have landed (or timed out; each node's give-back
    /// also follows them on their connection), releases on every node.
    /// `Ok(true)` when some node held it.
    pub(crate) async fn give_back(
        &self,
        give_back: &GiveBack<'_>,
        limit: Duration,
    ) -> Result<bool, OpError> {
        let GiveBack { keys, token, .. } = *give_back;
        self.settle(token).await;
        let per_node = self.per_node(limit);
        let answers = self
            .fan_out(
                0..self.nodes.len(),
                |node| async move {
                    let plain = GiveBack {
                        keys,
                        token,
                        fair: false,
                    };
                    match node.backend.give_back(&plain, per_node).await {
                        Ok(true) => Answer::Yes(()),
                        Ok(false) => Answer::No(None),
                        Err(e) => Answer::Failed(e.to_string()),
                    }
                },
                |_| false,
            )
            .await;
        let Tally { yes, failed, .. } = Tally::of(&answers);
        if failed > 0 {
            // Retried until every node answered (or the ttl is over).
            return Err(OpError::Quorum(Box::new(self.failure(&answers))));
        }
        Ok(yes > 0)
    }

    /// Ends a held lock: releases on every node, raising each node's
    /// counter to the holder's token; with a minimum hold (measured on this
    /// process's clock with Redlock) not yet over, cuts the lease to what is
    /// left of it instead.
    pub(crate) async fn end(&self, end: &End<'_>, limit: Duration) -> Result<Ended, OpError> {
        let End {
            keys,
            token,
            fence,
            hold,
            ..
        } = *end;
        if let Some((at_ms, min)) = hold {
            self.settle(token).await;
            let held_for = Duration::from_millis(local_ms().saturating_sub(at_ms));
            let left = min.saturating_sub(held_for);
            if left >= Duration::from_millis(1) {
                let renewal = Renewal {
                    keys,
                    token,
                    ttl: left,
                };
                return Ok(match self.extend(&renewal, limit).await? {
                    true => Ended::HeldUntilMinimum,
                    false => Ended::NotOwner,
                });
            }
        }
        Ok(match self.release(keys, token, fence, limit).await? {
            true => Ended::Deleted,
            false => Ended::NotOwner,
        })
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
