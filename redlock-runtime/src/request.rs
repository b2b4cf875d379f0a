//! [`LockRequest`]: the options of one lock, and the ways to take it:
//! [`acquire`](LockRequest::acquire), [`try_acquire`](LockRequest::try_acquire),
//! and the scoped [`run`](LockRequest::run) / [`try_run`](LockRequest::try_run).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::Either;
use tracing::Instrument as _;

use crate::acquire::{self, Outcome, Params, Shape};
use crate::core::Core;
use crate::error::LockError;
use crate::guard::LockGuard;
use crate::scope::{OnLost, RunScope};

/// A request for one lock, made by [`LockClient::lock`](crate::LockClient::lock): set the lease and
/// the wait, then acquire.
#[must_use = "a lock request does nothing until `.acquire()` or `.try_acquire()` is awaited"]
#[derive(Debug, Clone)]
pub struct LockRequest {
    core: Arc<Core>,
    params: Params,
    on_lost: OnLost,
}

impl LockRequest {
    pub(crate) fn new(core: Arc<Core>, key: String) -> Self {
        Self::shaped(core, key, Shape::Lock)
    }

    /// A request for `shape` under `key` (a side of a read/write lock,
    /// permits).
    pub(crate) fn shaped(core: Arc<Core>, key: String, shape: Shape) -> Self {
        let mut params = Params::new(key);
        params.shape = shape;
        Self {
            core,
            params,
            on_lost: OnLost::Cancel,
        }
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// What the request takes.
    pub(crate) fn shape_mut(&mut self) -> &mut Shape {
        &mut self.params.shape
    }

    /// The lease: how long the lock outlives its holder if the holder dies.
    /// While the guard lives, the watchdog renews the lease every `ttl / 3`.
    /// Defaults to the client's default ttl (30 s). Must be at least 1 ms.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.params.ttl = Some(ttl);
        self
    }

    /// How long to keep trying while another owner holds the lock.
    /// Defaults to zero: try once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.params.wait = wait;
        self
    }

    /// Whether the client's watchdog renews the lease while the guard
    /// lives. Defaults to `true`. Without it the ttl is a hard limit: the
    /// lock is presumed lost (and [`LockGuard::lost`] fires) when the lease
    /// runs out. (`renew = false` in `#[distributed_lock]`.)
    pub fn renew(mut self, renew: bool) -> Self {
        self.params.renew = renew;
        self
    }

    /// Keep other owners out for at least this long after the acquire, even
    /// when the work ends sooner (ShedLock's `lockAtLeastFor`): releasing
    /// then shortens the lease to what is left of the minimum instead of
    /// deleting the lock. Measured on Redis's clock (`TIME` at acquire and at
    /// release), never on an application node's; with Redlock, whose nodes'
    /// clocks are not compared, on this process's monotonic clock instead.
    /// For jobs deduplicated across nodes whose clocks differ: a node whose
    /// tick comes a little late still finds the lock held. Defaults to none.
    pub fn hold_at_least(mut self, hold: Duration) -> Self {
        self.params.hold_at_least = Some(hold);
        self
    }

    /// Serve waiters in arrival order (Redisson's FairLock).
    ///
    /// Waiters queue in Redis (a list beside the lock, with each waiter's
    /// presence in a sorted set). The lock goes to the first live waiter: a
    /// release on Redis hands it over in the same script, issuing its
    /// fencing token, and tells exactly that waiter, which holds it from
    /// then on without asking again (its watchdog then renews the lease to
    /// the ttl). Where writes must reach replicas (`.replicas(..)`), or for
    /// a lock taken with `.renew(false)`, the waiter asks once more, and the
    /// ask finds the lock its own. A waiter keeps its place while it
    /// keeps asking: it asks again on every wake-up and backoff step, and
    /// its place lasts three backoff ceilings plus one command timeout
    /// (1.1 s by default) after each ask. A waiter whose wait ran out has
    /// left the line when `acquire` answers (one more round trip; a
    /// `try_acquire` that found the lock held too), one that is cancelled
    /// leaves it at once from a spawned task (a lock handed to either
    /// meanwhile passes to the next waiter), and one whose process died
    /// leaves it within that time (a lock handed to it lasts no longer);
    /// none blocks the line for longer.
    ///
    /// The default is **not** fair: the first to ask after a release wins.
    /// That needs no queue and is the fastest when locks are rarely
    /// contended, but under heavy contention a releaser that asks again at
    /// once can take the lock back over and over. Use `fair()` where waiters
    /// must not starve; every client locking a key must use the same mode
    /// (an unfair acquire does not look at the line).
    pub fn fair(mut self) -> Self {
        self.params.fair = true;
        self
    }

    /// What [`run`](Self::run) does with its body when the lock is lost
    /// while the body runs. Defaults to [`OnLost::Cancel`].
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// Issue the fencing token with the acquire, in the same round trip,
    /// instead of on first ask (see
    /// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token)): for
    /// locks whose holders always take a token. Defaults to the client's
    /// [`fenced`](crate::LockClientBuilder::fenced) setting (off).
    pub fn fenced(mut self) -> Self {
        self.params.fenced = Some(true);
        self
    }

    /// The `lock` label of this lock's metrics (with the `metrics`
    /// feature; see [`crate::metrics`]). Defaults to the key's first
    /// `:`-separated part (`order:42:A-17` → `order`); name locks whose keys
    /// have no `:`, so that each key does not become its own series.
    pub fn label(mut self, label: impl Into<Arc<str>>) -> Self {
        self.params.label = Some(label.into());
        self
    }

    /// The key as given to [`LockClient::lock`](crate::LockClient::lock).
    pub fn key(&self) -> &str {
        &self.params.key
    }

    /// The label set with [`label`](Self::label) (for tests that check it
    /// is shared, not copied).
    #[cfg(test)]
    pub(crate) fn label_set(&self) -> Option<&Arc<str>> {
        self.params.label.as_ref()
    }

    /// Runs `body` holding the lock: acquires (waiting as
    /// [`acquire`](Self::acquire) does), runs the body, releases, and
    /// returns the body's value.
    ///
    /// - Inside the body, [`current_lock`](crate::current_lock) gives the
    ///   key, fencing token and state of the lock.
    /// - **Reentrancy**: inside a `run` scope holding key K, another `run`
    ///   (or `acquire`) of K through the same client (or a clone of it) in the
    ///   same task succeeds at once, with no Redis round trip; the lock is
    ///   released when the outermost scope ends. Ownership belongs to the
    ///   task: another task, or another client, waits as usual, and a task
    ///   started with `tokio::spawn` inside the scope is another owner (it
    ///   would wait for the lock its parent holds).
    ///   Re-entries take turns: two re-entries running at once in the same
    ///   task (`tokio::join!(a(), b())` where both lock K) never run their
    ///   bodies together; the second waits for the first as another owner
    ///   would, up to its own `wait` (with no wait it fails at once with
    ///   [`LockError::Busy`]). A reentrant guard from
    ///   [`acquire`](Self::acquire) holds its turn until it is released or
    ///   dropped. Re-entering a lock that was lost, or whose lease ran out,
    ///   fails with [`LockError::Lost`].
    /// - **Loss**: with [`OnLost::Cancel`] (the default), when the lock is
    ///   lost the body's future is dropped at its current `.await` and `run`
    ///   returns [`LockError::Lost`]; with [`OnLost::Signal`] the body runs
    ///   on and can check `current_lock()`.
    /// - A panic in the body, or dropping the `run` future, releases the lock
    ///   as dropping a guard does.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use redlock_runtime::LockClient;
    ///
    /// let locks = LockClient::in_memory();
    /// let total = locks
    ///     .lock("cart:42")
    ///     .wait(Duration::from_secs(5))
    ///     .run(async {
    ///         // A nested scope on the same key: no deadlock, no round trip.
    ///         locks.lock("cart:42").run(async { 40 + 2 }).await
    ///     })
    ///     .await??;
    /// assert_eq!(total, 42);
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); and [`LockError::Lost`] when the lock
    /// was lost while the body ran (with `OnLost::Cancel`: the body was
    /// stopped, or it finished but the release found the lock gone, so its
    /// work may have overlapped with another holder's).
    pub fn run<F: Future>(self, body: F) -> impl Future<Output = Result<F::Output, LockError>> {
        // Boxed at once: the future returned stays the same size however
        // large the body is, so nested locked calls neither multiply in
        // size nor copy bodies through the stack.
        self.run_scoped(Box::pin(body))
    }

    /// Like [`run`](Self::run), but when another owner holds the lock (at
    /// once, or for the whole wait) the body does not run and the result is
    /// `Ok(None)`, logged at debug level only. For scheduled jobs
    /// deduplicated across nodes: every node tries, one runs.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use redlock_runtime::LockClient;
    ///
    /// let locks = LockClient::in_memory();
    /// let held = locks.lock("job:nightly").acquire().await?;
    /// let ran = locks
    ///     .lock("job:nightly")
    ///     .hold_at_least(Duration::from_secs(30))
    ///     .try_run(async { "report sent" })
    ///     .await?;
    /// assert_eq!(ran, None, "another node holds the job");
    /// # drop(held);
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`run`](Self::run), less the busy cases.
    pub fn try_run<F: Future>(
        self,
        body: F,
    ) -> impl Future<Output = Result<Option<F::Output>, LockError>> {
        let scoped = self.run_scoped(Box::pin(body)); // boxed as in `run`
        async move {
            match scoped.await {
                Ok(value) => Ok(Some(value)),
                Err(e) if e.is_busy() => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    /// [`run`](Self::run): `Busy`/`WaitTimeout` when another owner kept the
    /// lock.
    async fn run_scoped<F: Future>(self, body: Pin<Box<F>>) -> Result<F::Output, LockError> {
        let busy = |key: String, wait: Duration, holder: Option<String>| {
            tracing::debug!(target: "redlock", key = %key, holder = holder.as_deref().unwrap_or("unknown"), "lock busy, body skipped");
            busy_error(key, wait, holder)
        };
        let Self {
            core,
            params,
            on_lost,
        } = self;
        if let Some(outer) = acquire::reentry(&core, &params)? {
            let Some(turn) = acquire::reenter(&outer, &params.key, params.wait).await? else {
                return Err(busy(params.key, params.wait, None));
            };
            let scope =
                RunScope::enter(Arc::clone(&core), Arc::clone(&outer.held), outer.depth + 1);
            let value = RunScope::run(scope, body).await;
            drop(turn);
            return Ok(value);
        }
        let guard = match acquire::acquire(&core, &params).await? {
            Outcome::Acquired(guard) => guard,
            Outcome::Busy => {
                let holder = crate::inspect::holder(&core, &params.key, params.shape).await;
                return Err(busy(params.key, params.wait, holder));
            }
        };
        let key = params.key;
        // Permits are not a lock of this task's: `current_lock()` and
        // re-entries do not see them.
        let body = match params.shape {
            Shape::Permits { .. } => Either::Left(body),
            _ => Either::Right(RunScope::run(
                RunScope::enter(Arc::clone(&core), Arc::clone(guard.held()), 1),
                body,
            )),
        };
        let body = body.instrument(guard.span().clone());
        let value = match on_lost {
            OnLost::Cancel => {
                let refused = guard.refused();
                tokio::select! {
                    biased;
                    guess = refused => {
                        // The body is dropped: now why (one read at most).
                        let reason = crate::lock::reason_within(guard.lost(), guess, core.settings().command_timeout).await;
                        tracing::warn!(target: "redlock", key = %key, %reason, "lock lost; body cancelled");
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
                // The body finished; the lease ends by itself. Signal mode
                // left the decision to the body.
                tracing::warn!(target: "redlock", key = %key, error = %e, "release after the body failed");
                Ok(value)
            }
        }
    }

    /// Takes the lock, waiting up to the request's wait while another owner
    /// holds it.
    ///
    /// While waiting, attempts are paced by the client's [`RetryPolicy`](crate::RetryPolicy) and
    /// woken as the holder's lease ends. Each attempt is bounded by the
    /// command timeout and by what is left of the wait (but at least 50 ms),
    /// so this returns at most about 50 ms after the wait ends; with no wait,
    /// the single attempt is bounded by the command timeout. Transient Redis
    /// failures are retried while the wait lasts.
    ///
    /// # Errors
    /// [`LockError::Busy`] (no wait) or [`LockError::WaitTimeout`] when
    /// another owner held the lock; [`LockError::InvalidKey`] and
    /// [`LockError::Config`] for bad input; [`LockError::Redis`],
    /// [`LockError::Timeout`] or [`LockError::Pool`] when Redis failed (the
    /// last failure, if the wait ended on one).
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let Params { key, wait, .. } = &self.params;
        match acquire::acquire(&self.core, &self.params).await? {
            Outcome::Acquired(guard) => Ok(guard),
            Outcome::Busy => {
                let holder = crate::inspect::holder(&self.core, key, self.params.shape).await;
                Err(busy_error(key.clone(), *wait, holder))
            }
        }
    }

    /// Like [`acquire`](Self::acquire), but a lock still held by another
    /// owner when the wait ends (at once, with no wait) is `Ok(None)`, not an
    /// error. Redis failures are still errors.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), less the busy cases.
    pub async fn try_acquire(self) -> Result<Option<LockGuard>, LockError> {
        Ok(match acquire::acquire(&self.core, &self.params).await? {
            Outcome::Acquired(guard) => Some(guard),
            Outcome::Busy => None,
        })
    }
}

/// The error of a request that found the lock held by `holder` (described
/// by its public part) for the whole `wait`.
pub(crate) fn busy_error(key: String, wait: Duration, holder: Option<String>) -> LockError {
    if wait.is_zero() {
        LockError::Busy { key, holder }
    } else {
        LockError::WaitTimeout {
            key,
            waited: wait,
            holder,
        }
    }
}
