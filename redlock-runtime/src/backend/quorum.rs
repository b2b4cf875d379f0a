//! Redlock's lock verbs over the quorum's fan-out (see
//! [`store::quorum`](crate::store::quorum) for how a majority is reached).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{
    Acquire, AcquireReply, End, Ended, GiveBack, IssueFence, Keys, LockKeys, OpError, Renewal,
};
use crate::error::ConnectFailure;
use crate::store::quorum::votes::{Answer, Tally};
use crate::store::quorum::{Landed, Node, QuorumBackend, drift};
use crate::store::server::On;
use crate::store::{refused_a_command, refused_command};

mod force;
mod inspect;

/// The clock `hold_at_least` is measured on with Redlock: this process's
/// monotonic clock, in ms since the first use.
fn local_ms() -> u64 {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The refusals (an ACL's `NOPERM`) the nodes answered one acquire with.
/// No retry gets a permission: when more nodes refused than a majority
/// can spare, the acquire fails at once with the first of them, which
/// names the refused command.
#[derive(Default)]
struct Refusals {
    count: AtomicUsize,
    first: Mutex<Option<OpError>>,
}

impl Refusals {
    /// Counts `e` when it is a refusal; its text either way, for the
    /// node's answer.
    fn note(&self, e: OpError) -> String {
        let text = e.to_string();
        if matches!(&e, OpError::Redis(source) if refused_command(source).is_some()) {
            self.count.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first.lock().unwrap_or_else(PoisonError::into_inner);
            first.get_or_insert(e);
        }
        text
    }

    /// The first refusal, when more than `spare` nodes refused.
    fn beyond(&self, spare: usize) -> Option<OpError> {
        if self.count.load(Ordering::Relaxed) <= spare {
            return None;
        }
        self.first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// How long a node's refusal of the acquire script is trusted: meanwhile
/// its plain acquires go without the script, and after it the script is
/// tried again, so a permission granted since is used.
const REFUSAL_KEPT: Duration = Duration::from_secs(60);

/// A grant without a fencing token (see "Without scripts" below).
const TOKENLESS: u64 = 0;

/// One node's acquire: granted (with its fencing counter, or
/// [`TOKENLESS`]), refused, or failed (including a node still in its
/// restart delay).
///
/// **Without scripts.** A node whose ACL refuses the acquire script
/// (`-@scripting`) grants a plain lock (`fenced` false) without it: `SET
/// NX` on the acquire's first attempt, the conditional attempt (`SET NX
/// GET`, which finds its own token after a lost answer) on a later one,
/// as on one server (`primitive/lock/plain.rs`, `conditional.rs`). Such a
/// grant issues no token, and a lock with one in its majority has none:
/// its `fencing_token()` is refused with the node's refusal, so no token
/// of it is ever used, and the tokens of the locks that have one keep
/// their argument (`design`, "Fencing tokens": a tokenless holder issues
/// nothing, raises nothing, and its release is the conditional delete).
/// Only on a node with the conditional delete (Valkey 9, Redis 8.4):
/// elsewhere the release and the renewal are scripts too, and a lock
/// taken there could not be released, so the refusal is counted as for a
/// fenced lock. The refusal is remembered for [`REFUSAL_KEPT`], so the
/// user's later acquires send no script to be refused. A lock that wants its token
/// now (`fenced`) counts the refusal instead, and fails at once when too
/// many nodes refuse.
async fn acquire_on(
    node: &Node,
    request: &Acquire<'_>,
    per_node: Duration,
    refusals: &Refusals,
) -> Answer<u64> {
    let answer = |reply| match reply {
        AcquireReply::Acquired { fence, .. } => Answer::Yes(fence),
        AcquireReply::Busy { pttl } => Answer::No(pttl),
    };
    if request.fenced || !node.refuses_scripts(REFUSAL_KEPT) {
        let scripted = Acquire {
            want_time: false,
            line: None,
            // Redlock spreads the largest token on release: issued now.
            fenced: true,
            fresh: false,
            ..*request
        };
        match node.backend.acquire(&scripted, per_node).await {
            Ok(reply) => return answer(reply),
            // A refused command (the script's), on a node whose release
            // needs none (the conditional delete); not a refused key, which
            // the plain attempt would meet as well.
            Err(OpError::Redis(e))
                if !request.fenced
                    && refused_a_command(&e)
                    && node.backend.conditional_on(On::Waiting, request.token) =>
            {
                node.refused_script(e);
            }
            Err(e) => return Answer::Failed(refusals.note(e)),
        }
    }
    let plain = Acquire {
        want_time: false,
        line: None,
        fenced: false,
        ..*request
    };
    match node.backend.acquire(&plain, per_node).await {
        Ok(AcquireReply::Acquired { .. }) => Answer::Yes(TOKENLESS),
        Ok(busy) => answer(busy),
        Err(e) => Answer::Failed(refusals.note(e)),
    }
}

/// The fencing token of a lock granted by `granted`'s fences: the largest,
/// or [`TOKENLESS`] when one of them is (see [`acquire_on`]).
fn token_of(granted: impl Iterator<Item = u64>) -> u64 {
    let mut largest = TOKENLESS;
    for fence in granted {
        if fence == TOKENLESS {
            return TOKENLESS;
        }
        largest = largest.max(fence);
    }
    largest
}

impl QuorumBackend {
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
        let Keys::Lock(lock) = keys else {
            return Err(OpError::Unsupported("acquire"));
        };
        let started = Instant::now();
        // Small against the ttl: a slow node must not eat the validity.
        let per_node = self
            .per_node(limit)
            .min(ttl / 10)
            .max(Duration::from_millis(1));
        let n = self.nodes.len();
        let quorum = self.quorum;
        let (keys_owned, token_owned) = (Arc::new(keys.clone()), Arc::<str>::from(token));
        let (fenced, fresh) = (request.fenced, request.fresh);
        let tracker = self.track(&token_owned, n);
        let refusals = Arc::new(Refusals::default());
        let answers = self
            .fan_out_detached(
                |node| {
                    let (keys, token) = (Arc::clone(&keys_owned), Arc::clone(&token_owned));
                    let refusals = Arc::clone(&refusals);
                    // Dropped with the task, even one that never ran.
                    let landed = Landed(tracker.clone());
                    async move {
                        let _landed = landed;
                        let request = Acquire {
                            keys: &keys,
                            token: &token,
                            ttl,
                            want_time: false,
                            line: None,
                            fenced,
                            fresh,
                        };
                        acquire_on(&node, &request, per_node, &refusals).await
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
            let fence = token_of(answers.iter().filter_map(|a| match a {
                Some(Answer::Yes(fence)) => Some(*fence),
                _ => None,
            }));
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
            self.release_where(lock, token, &answers, per_node).await;
            return Err(OpError::Quorum(Box::new(failure)));
        }

        // No majority: give back what was granted (and what may have been,
        // on nodes that did not answer) before the caller retries with the
        // same token.
        self.release_where(lock, token, &answers, per_node).await;
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
        // A user whose ACL refuses the acquire (a script, without
        // `+@scripting`) on more nodes than a majority can spare.
        if let Some(refusal) = refusals.beyond(n - quorum) {
            return Err(refusal);
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

    /// The fencing token of a lock taken without one (see [`acquire_on`]):
    /// never issued later on Redlock, whose tokens come with the acquire
    /// (the argument in `design`, "Fencing tokens", needs the majority's
    /// counters raised as it grants). Refused with the refusal that made
    /// the grant tokenless, which names the permission to grant.
    pub(crate) fn issue_fence(&self, _issue: &IssueFence<'_>) -> Result<Option<u64>, OpError> {
        match self.nodes.iter().find_map(|node| node.script_refusal()) {
            Some(refusal) => Err(OpError::Redis(refusal)),
            None => Err(OpError::Unsupported("issue_fence")),
        }
    }

    /// Releases `token` on every node that granted it or may have.
    async fn release_where<T>(
        &self,
        keys: &LockKeys,
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
        keys: &LockKeys,
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
        let Keys::Lock(lock) = keys else {
            return Err(OpError::Unsupported("end"));
        };
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
        Ok(match self.release(lock, token, fence, limit).await? {
            true => Ended::Deleted,
            false => Ended::NotOwner,
        })
    }
}
