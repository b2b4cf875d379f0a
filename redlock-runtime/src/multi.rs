//! [`MultiLock`]: several locks taken as one, without deadlock; and
//! [`MultiLockGuard`], the guard of all of them.
//!
//! Keys are grouped by hash tag and the groups taken in the order of their
//! tags, the same for every caller: two callers with the same keys in any
//! order never wait for each other in a cycle. A group of several keys
//! (one hash tag, one slot) is taken in one script, all or none; a group
//! of one key is a lock's acquire (on Redlock, each key is such a group:
//! taken by quorum). When a group stays busy past the wait, or the acquire
//! fails or is cancelled, every lock taken so far is given back.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::acquire::{self, Next, Outcome, Params, Wait};
use crate::backend::{GroupAcquire, GroupReply, Keys, Kind, LockKeys};
use crate::core::Core;
use crate::error::{ConfigError, LockError, Operation};
use crate::giveback::PendingAcquire;
use crate::guard::LockGuard;
use crate::lock::{HeldLock, Lost, Taken};
use crate::scope::{OnLost, RunScope};
use crate::telemetry::Labels;
use crate::util::{validate_key, validate_ttl, validate_wait};

/// A request for several locks at once (Redisson's `RedissonMultiLock`,
/// done right), made by [`LockClient::multi_lock`](crate::LockClient::multi_lock):
/// one guard for all, a fencing token per key.
///
/// - No deadlock: keys are taken in one global order (by hash tag), so two
///   callers locking `[a, b]` and `[b, a]` never wait for each other in a
///   cycle.
/// - Keys that share a hash tag (`{account:7}:from`, `{account:7}:to`) are
///   taken in one script, atomically, in one round trip.
/// - Nothing is left half-taken: when the wait ends, Redis fails, or the
///   acquire is cancelled (dropped) midway, every lock taken is given back.
/// - Each lock is renewed by the client's watchdog (in its batches) and
///   released with the guard; the guard is [`lost`](MultiLockGuard::lost)
///   when any of its locks is.
/// - Works over Redlock: each key by quorum.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
///
/// let locks = redlock_runtime::LockClient::in_memory();
/// let both = locks
///     .multi_lock(["account:2", "account:1"])
///     .wait(Duration::from_secs(5))
///     .acquire()
///     .await?;
/// assert!(both.fencing_token("account:1").await?.is_some());
/// assert!(locks.lock("account:2").try_acquire().await?.is_none());
/// both.release().await?;
/// # Ok::<(), redlock_runtime::LockError>(())
/// # }).unwrap();
/// ```
#[must_use = "a multi-lock request does nothing until `.acquire()` or `.try_acquire()` is awaited"]
#[derive(Debug, Clone)]
pub struct MultiLock {
    core: Arc<Core>,
    keys: Vec<String>,
    ttl: Option<Duration>,
    wait: Duration,
    renew: bool,
    label: Option<Arc<str>>,
    on_lost: OnLost,
}

impl MultiLock {
    pub(crate) fn new(core: Arc<Core>, keys: Vec<String>) -> Self {
        Self {
            core,
            keys,
            ttl: None,
            wait: Duration::ZERO,
            renew: true,
            label: None,
            on_lost: OnLost::Cancel,
        }
    }

    /// The lease of each lock. See [`LockRequest::ttl`](crate::LockRequest::ttl).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// How long to keep trying, for all the keys together. Defaults to
    /// zero: try once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Whether the watchdog renews the leases. See
    /// [`LockRequest::renew`](crate::LockRequest::renew).
    pub fn renew(mut self, renew: bool) -> Self {
        self.renew = renew;
        self
    }

    /// What [`run`](Self::run) does when a lock is lost while its body
    /// runs. See [`LockRequest::on_lost`](crate::LockRequest::on_lost).
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// The `lock` label of the locks' metrics. See
    /// [`LockRequest::label`](crate::LockRequest::label).
    pub fn label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// The keys, as given.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Takes every lock, waiting up to the request's wait while any is
    /// held by another owner.
    ///
    /// # Errors
    /// [`LockError::Busy`] / [`LockError::WaitTimeout`] naming a key still
    /// held by another owner (every lock taken was given back);
    /// [`LockError::Config`] for no keys; otherwise as
    /// [`LockRequest::acquire`](crate::LockRequest::acquire).
    pub async fn acquire(self) -> Result<MultiLockGuard, LockError> {
        let (wait, core) = (self.wait, Arc::clone(&self.core));
        match self.take().await? {
            Ok(guard) => Ok(guard),
            Err(key) => {
                let holder = crate::inspect::holder(&core, &key, crate::acquire::Shape::Lock).await;
                Err(crate::request::busy_error(key, wait, holder))
            }
        }
    }

    /// Like [`acquire`](Self::acquire), but `Ok(None)` when a key stayed
    /// held by another owner.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), less the busy cases.
    pub async fn try_acquire(self) -> Result<Option<MultiLockGuard>, LockError> {
        Ok(self.take().await?.ok())
    }

    /// Runs `body` holding every lock, then releases them (see
    /// [`LockRequest::run`](crate::LockRequest::run)): inside it, a lock
    /// of any of the keys re-enters, and the locks are lost together.
    ///
    /// # Errors
    /// As [`LockRequest::run`](crate::LockRequest::run).
    pub async fn run<F: Future>(self, body: F) -> Result<F::Output, LockError> {
        let (on_lost, client) = (self.on_lost, Arc::clone(&self.core));
        let guard = self.acquire().await?;
        // One scope per key, innermost last: each key re-enters.
        let mut scope = RunScope::current();
        for g in &guard.guards {
            let core = Arc::clone(&client);
            scope = Some(RunScope::enter_under(core, Arc::clone(g.held()), scope));
        }
        let body = Box::pin(body);
        let body = async move {
            match scope {
                Some(scope) => RunScope::run(scope, body).await,
                None => body.await,
            }
        };
        let value = match on_lost {
            OnLost::Cancel => {
                let refused = guard.refused();
                tokio::select! {
                    biased;
                    guess = refused => {
                        // The body is dropped: now why (one read at most).
                        let reason = crate::lock::reason_within(guard.lost(), guess, client.settings().command_timeout).await;
                        let key = guard.lost_key().unwrap_or_default();
                        tracing::warn!(target: "redlock", key = %key, %reason, "multi-lock lost; body cancelled");
                        let _ = guard.release().await;
                        return Err(LockError::Lost { key, reason });
                    }
                    value = body => value,
                }
            }
            OnLost::Signal => body.await,
        };
        match guard.release().await {
            Ok(()) => Ok(value),
            Err(e) if e.is_lost() && on_lost == OnLost::Cancel => Err(e),
            Err(e) => {
                tracing::warn!(target: "redlock", error = %e, "multi-lock release after the body failed");
                Ok(value)
            }
        }
    }

    /// Like [`run`](Self::run), but `Ok(None)` without running the body
    /// when a key stayed held by another owner.
    ///
    /// # Errors
    /// As [`run`](Self::run), less the busy cases.
    pub async fn try_run<F: Future>(self, body: F) -> Result<Option<F::Output>, LockError> {
        match self.run(body).await {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_busy() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The guard, or the key still busy when the wait ended.
    async fn take(self) -> Result<Result<MultiLockGuard, String>, LockError> {
        if self.keys.is_empty() {
            return Err(ConfigError::InvalidCount {
                name: "keys",
                value: 0,
                reason: "a multi-lock needs at least one key",
            }
            .into());
        }
        for key in &self.keys {
            validate_key(key)?;
        }
        let settings = self.core.settings();
        let ttl = self.ttl.unwrap_or(settings.default_ttl);
        validate_ttl("ttl", ttl)?;
        validate_wait(self.wait)?;
        self.core.check_open(&self.keys[0])?;
        let deadline = Instant::now() + self.wait;
        let mut groups: BTreeMap<String, Vec<LockKeys>> = BTreeMap::new();
        for key in &self.keys {
            let keys = LockKeys::new(&settings.key_prefix, key.clone());
            let group = groups.entry(keys.tag().to_owned()).or_default();
            if !group.iter().any(|k| k.lock == keys.lock) {
                group.push(keys);
            }
        }
        let mut guards = Vec::with_capacity(self.keys.len());
        for (_, mut group) in groups {
            group.sort_by(|a, b| a.lock.cmp(&b.lock));
            let reentered = group.iter().any(|k| {
                RunScope::holding(self.core.id(), &k.user, |kind| kind == Kind::Lock).is_some()
            });
            let one_by_one = group.len() == 1 || reentered || !self.core.backend().takes_groups();
            let taken = if one_by_one {
                self.each(group, ttl, deadline, &mut guards).await?
            } else {
                self.group(group, ttl, deadline, &mut guards).await?
            };
            if let Err(busy) = taken {
                // Given back now, not left to the guards' drops: the caller
                // sees nothing held when this returns.
                release_all(std::mem::take(&mut guards)).await;
                return Ok(Err(busy));
            }
        }
        if self.core.is_closed() {
            // A shutdown may have read the client's books before these
            // guards were on them (see `acquire::closed_after`).
            Box::pin(release_all(guards)).await;
            return Err(LockError::ShutDown {
                key: self.keys[0].clone(),
            });
        }
        Ok(Ok(MultiLockGuard { guards }))
    }

    /// Takes the keys of `group` one by one, as lock acquires.
    async fn each(
        &self,
        group: Vec<LockKeys>,
        ttl: Duration,
        deadline: Instant,
        guards: &mut Vec<LockGuard>,
    ) -> Result<Result<(), String>, LockError> {
        for keys in group {
            let mut params = Params::new(keys.user.clone());
            params.ttl = Some(ttl);
            params.wait = deadline.saturating_duration_since(Instant::now());
            params.renew = self.renew;
            params.label.clone_from(&self.label);
            match acquire::acquire(&self.core, &params).await? {
                Outcome::Acquired(guard) => guards.push(guard),
                Outcome::Busy => return Ok(Err(keys.user)),
            }
        }
        Ok(Ok(()))
    }

    /// Takes the keys of one hash tag in one script, all or none, waiting
    /// (woken by the releases of the key that was busy) until `deadline`.
    async fn group(
        &self,
        group: Vec<LockKeys>,
        ttl: Duration,
        deadline: Instant,
        guards: &mut Vec<LockGuard>,
    ) -> Result<Result<(), String>, LockError> {
        let core = &self.core;
        let settings = core.settings();
        let token = core.new_token(false);
        let mut pending: Vec<PendingAcquire<'_>> = group
            .iter()
            .map(|k| PendingAcquire::new(core, Keys::Lock(k.clone()), token.clone(), false))
            .collect();
        let now = Instant::now();
        let mut wait = Wait::new(deadline.saturating_duration_since(now), now);
        loop {
            let woken = wait.arm();
            let limit = wait.limit(settings.command_timeout);
            let sent = Instant::now();
            for p in &mut pending {
                p.sending(sent, ttl);
            }
            let request = GroupAcquire {
                keys: &group[0],
                all: &group,
                token: &token,
                ttl,
            };
            let (index, pttl, error) = match core.backend().acquire_group(&request, limit).await {
                Ok(GroupReply::Acquired(fences)) => {
                    for p in pending {
                        p.took();
                    }
                    for (keys, fence) in group.into_iter().zip(fences) {
                        let labels =
                            Labels::new(self.label.as_ref(), &keys.user, core.backend().mode());
                        let taken = Taken {
                            keys: Keys::Lock(keys),
                            token: token.clone(),
                            fence,
                            ttl,
                            sent,
                            renew: self.renew,
                            fair: false,
                            contended: false,
                            hold: None,
                            labels,
                            parent: tracing::Span::current(),
                        };
                        let held = HeldLock::new(core.id(), taken, core.backend().validity(ttl));
                        guards.push(LockGuard::new(Arc::clone(core), held));
                    }
                    return Ok(Ok(()));
                }
                Ok(GroupReply::Busy { index, pttl }) => {
                    for p in &mut pending {
                        p.answered(false);
                    }
                    (index, pttl, None)
                }
                Err(e) => {
                    // An error reply too: the script may have set some of
                    // the group's locks before it failed (see
                    // `OpError::may_have_written`), and nothing of a group
                    // that returned no guard may stay held.
                    let unknown = e.may_have_written();
                    for p in &mut pending {
                        p.answered(unknown);
                    }
                    if !e.is_transient() {
                        return Err(e.into_lock_error(&group[0].user, Operation::Acquire));
                    }
                    (0, None, Some(e))
                }
            };
            let busy = error.is_none().then(|| (group[index].lock.as_str(), None));
            // `pending` is dropped on a shutdown: given back.
            match wait.next(core, woken, busy, pttl, &group[0].user).await? {
                Next::Attempt => {}
                Next::GaveUp => {
                    return match error {
                        Some(e) => Err(e.into_lock_error(&group[0].user, Operation::Acquire)),
                        None => Ok(Err(group[index].user.clone())),
                    };
                }
            }
        }
    }
}

async fn release_all(guards: Vec<LockGuard>) -> Vec<Result<(), LockError>> {
    futures_util::future::join_all(guards.into_iter().map(LockGuard::release)).await
}

/// The locks of a [`MultiLock`], held together: released together on
/// [`release`](Self::release) or drop, renewed by the watchdog.
pub struct MultiLockGuard {
    /// In the order they were taken.
    guards: Vec<LockGuard>,
}

impl MultiLockGuard {
    /// The keys held, in the order they were taken (by hash tag).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.guards.iter().map(LockGuard::key)
    }

    /// The fencing token of `key`'s lock (see
    /// [`LockGuard::fencing_token`]: issued on first ask, unless the keys
    /// shared a hash tag and were taken together, which issues them);
    /// `None` for a key not in this guard.
    ///
    /// # Errors
    /// As [`LockGuard::fencing_token`].
    pub async fn fencing_token(&self, key: &str) -> Result<Option<u64>, LockError> {
        match self.guards.iter().find(|g| g.key() == key) {
            Some(guard) => guard.fencing_token().await.map(Some),
            None => Ok(None),
        }
    }

    /// Each key with its fencing token, in the order the keys were taken.
    ///
    /// # Errors
    /// As [`LockGuard::fencing_token`], for the first that fails.
    pub async fn fencing_tokens(&self) -> Result<Vec<(String, u64)>, LockError> {
        let mut out = Vec::with_capacity(self.guards.len());
        for guard in &self.guards {
            out.push((guard.key().to_owned(), guard.fencing_token().await?));
        }
        Ok(out)
    }

    /// True while every lock is presumed held.
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(LockGuard::is_held)
    }

    /// How long every lease is known to last from now (the shortest).
    pub fn remaining(&self) -> Duration {
        self.guards
            .iter()
            .map(LockGuard::remaining)
            .min()
            .unwrap_or_default()
    }

    /// Completes when any of the locks is known or presumed lost.
    pub fn lost(&self) -> Lost {
        Lost::any(self.guards.iter().map(LockGuard::lost).collect())
    }

    /// Completes as soon as any lock is known lost, before why is read:
    /// what `run` cancels its body by.
    fn refused(&self) -> Lost {
        Lost::any(self.guards.iter().map(LockGuard::refused).collect())
    }

    /// The key of a lock that is lost, if one is.
    fn lost_key(&self) -> Option<String> {
        self.guards
            .iter()
            .find(|g| !g.is_held())
            .map(|g| g.key().to_owned())
    }

    /// Releases every lock.
    ///
    /// # Errors
    /// The first failure among the releases ([`LockError::Lost`] when a
    /// lock was no longer this guard's); the others were released.
    pub async fn release(self) -> Result<(), LockError> {
        release_all(self.guards)
            .await
            .into_iter()
            .find(Result::is_err)
            .unwrap_or(Ok(()))
    }
}

impl fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("locks", &self.guards)
            .finish()
    }
}
