//! [`LockGuard`]: a held lock, its fencing token, and how it ends.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, watch};
use tokio::time::Instant;
use tracing::{Instrument as _, Span};

use crate::backend::{HoldRelease, Keys, OpError};
use crate::client::LockClient;
use crate::error::{LockError, LostReason, Operation};
use crate::giveback::retry_until;
use crate::telemetry::{self, How, Labels};
use crate::util::validate_ttl;

/// A held lock.
///
/// While the guard lives, the client's watchdog renews the lease at least
/// every `ttl / 3` (unless the request turned it off). End it with [`release`](Self::release) to
/// learn whether the lock was still yours; dropping the guard instead (an
/// early return, a panic, a cancelled future) releases it from a spawned task
/// within milliseconds, never blocking in `drop`.
///
/// A lock can be lost while held: the process paused longer than the lease,
/// Redis restarted empty, someone deleted the key. [`lost`](Self::lost) tells
/// you when that is known or presumed, and [`fencing_token`](Self::fencing_token)
/// lets the store you write to reject a holder that lost its lock: tokens
/// strictly increase with each acquisition of a key.
pub struct LockGuard {
    shared: Arc<Shared>,
    /// The lock's id in the client's watchdog; `None` for a reentrant guard,
    /// which borrows the lock of an enclosing `run` scope of its task.
    watch_id: Option<u64>,
    runtime: Option<tokio::runtime::Handle>,
    released: bool,
    /// A reentrant guard's turn among the re-entries of its scope (see
    /// [`LockRequest::run`](crate::LockRequest::run)): held until it is
    /// released or dropped.
    _turn: Option<OwnedMutexGuard<()>>,
}

/// What the guard and the watchdog share.
pub(crate) struct Shared {
    pub(crate) client: LockClient,
    pub(crate) keys: Keys,
    pub(crate) token: String,
    pub(crate) fence: u64,
    /// Whether the watchdog renews the lease (else it only watches it end).
    pub(crate) renew: bool,
    /// Taken in fair mode: the release wakes the first waiter in line.
    pub(crate) fair: bool,
    /// The minimum hold, and the acquire time on the store's clock.
    pub(crate) hold: Option<Hold>,
    /// Held by the watchdog while a renewal of this lock is in flight, and
    /// by the release: no renewal is sent after a release.
    pub(crate) renewal_gate: Arc<tokio::sync::Mutex<()>>,
    lease: Mutex<Lease>,
    lost: watch::Sender<Option<LostReason>>,
    /// Set once the owning guard released or dropped the lock: every view
    /// of it (reentrant guards, [`CurrentLock`](crate::CurrentLock)) then
    /// says it is not held.
    ended: AtomicBool,
    /// The metrics' labels.
    pub(crate) labels: Labels,
    /// When the acquire returned (for the hold-time histogram).
    acquired_at: Instant,
    /// `redlock.hold{key, fencing_token}`: open while the lock is held.
    pub(crate) span: Span,
}

/// What an acquire that succeeded hands to [`LockGuard::new`].
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) keys: Keys,
    pub(crate) token: String,
    pub(crate) fence: u64,
    pub(crate) ttl: Duration,
    /// When the acquire that took the lock was sent.
    pub(crate) sent: Instant,
    pub(crate) renew: bool,
    pub(crate) fair: bool,
    pub(crate) hold: Option<Hold>,
    pub(crate) labels: Labels,
}

/// A minimum hold (`hold_at_least`), measured on the store's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hold {
    /// When the lock was acquired, on the store's clock (ms).
    pub(crate) at_ms: u64,
    pub(crate) min: Duration,
}

/// The lease as this process knows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    /// The ttl renewals use.
    pub(crate) ttl: Duration,
    /// When the last confirmed (re)set of the lease was sent.
    pub(crate) sent: Instant,
    /// `sent + ttl`: the lease cannot end before this on the Redis side
    /// (Redis received the command after it was sent), so this process may
    /// presume the lock held until then.
    pub(crate) deadline: Instant,
    /// When a failed renewal is to be tried again.
    pub(crate) retry_at: Option<Instant>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("key", &self.keys.user)
            .field("fence", &self.fence)
            .field("renew", &self.renew)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn lease(&self) -> Lease {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a confirmed (re)set of the lease sent at `sent`, unless a
    /// later one was already recorded.
    pub(crate) fn renewed(&self, sent: Instant, ttl: Duration) {
        let mut lease = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        if sent >= lease.sent {
            *lease = Lease {
                ttl,
                sent,
                deadline: sent + self.client.backend().validity(ttl),
                retry_at: None,
            };
        }
    }

    /// Schedules the next renewal attempt after a failure.
    pub(crate) fn retry_at(&self, at: Instant) {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retry_at = Some(at);
    }

    /// When the watchdog next has to look at this lock.
    pub(crate) fn next_due(&self) -> Instant {
        let lease = self.lease();
        if self.renew {
            lease
                .retry_at
                .unwrap_or(lease.sent + lease.ttl / 3)
                .min(lease.deadline)
        } else {
            lease.deadline
        }
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        *self.lost.borrow()
    }

    /// Not released, not known lost, and the lease last confirmed has not
    /// run out.
    pub(crate) fn is_held(&self) -> bool {
        !self.ended.load(Ordering::Acquire)
            && self.lost_reason().is_none()
            && Instant::now() < self.lease().deadline
    }

    /// How long the lease is known to last from now (zero once not held).
    pub(crate) fn remaining(&self) -> Duration {
        if !self.is_held() {
            return Duration::ZERO;
        }
        self.lease()
            .deadline
            .saturating_duration_since(Instant::now())
    }

    /// Marks the lock released by its owner (every view then says so).
    fn set_ended(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Why a re-entry into this lock must fail, if it must: the lock was
    /// lost, released, or its lease ran out.
    pub(crate) fn reentry_refused(&self) -> Option<LostReason> {
        if self.ended.load(Ordering::Acquire) {
            return Some(LostReason::Released);
        }
        if let Some(reason) = self.lost_reason() {
            return Some(reason);
        }
        if Instant::now() >= self.lease().deadline {
            return Some(if self.renew {
                LostReason::Unconfirmed
            } else {
                LostReason::Expired
            });
        }
        None
    }

    pub(crate) fn lost_future(&self) -> Lost {
        let mut rx = self.lost.subscribe();
        Lost {
            inner: Box::pin(async move {
                loop {
                    if let Some(reason) = *rx.borrow_and_update() {
                        return reason;
                    }
                    if rx.changed().await.is_err() {
                        // The guard is gone and the lock was not lost.
                        return std::future::pending().await;
                    }
                }
            }),
        }
    }

    /// Ends the lock on the store: deletes it, or, with a minimum hold not
    /// yet over, leaves it to expire when the hold ends. `Ok(false)` when the
    /// lock no longer held this owner's token.
    pub(crate) async fn end(&self) -> Result<bool, OpError> {
        let limit = self.client.settings().command_timeout;
        let backend = self.client.backend();
        match self.hold {
            None if self.fair => {
                let (released, next) = backend
                    .release_fair(&self.keys, &self.token, self.fence, limit)
                    .await?;
                if released && matches!(backend, crate::backend::Backend::Memory(_)) {
                    // Redis publishes from the release script.
                    self.client
                        .wakeups()
                        .released_locally(&self.keys.lock, next.as_deref());
                }
                Ok(released)
            }
            None => {
                let released = backend
                    .release(&self.keys, &self.token, self.fence, limit)
                    .await?;
                if released && matches!(backend, crate::backend::Backend::Memory(_)) {
                    self.client
                        .wakeups()
                        .released_locally(&self.keys.lock, None);
                }
                Ok(released)
            }
            Some(hold) => {
                let done = backend
                    .release_after_hold(
                        &self.keys,
                        &self.token,
                        hold.at_ms,
                        hold.min,
                        self.fence,
                        limit,
                    )
                    .await?;
                if done == HoldRelease::HeldUntilMinimum {
                    tracing::debug!(target: "redlock", key = %self.keys.user, "lock kept until its minimum hold ends");
                } else if done == HoldRelease::Deleted
                    && matches!(backend, crate::backend::Backend::Memory(_))
                {
                    self.client
                        .wakeups()
                        .released_locally(&self.keys.lock, None);
                }
                Ok(done != HoldRelease::NotOwner)
            }
        }
    }

    /// Marks the lock lost (once) and wakes every [`Lost`] future.
    pub(crate) fn mark_lost(&self, reason: LostReason) {
        let first = self.lost.send_if_modified(|current| {
            if current.is_none() {
                // Counted before anyone waiting on `lost()` wakes.
                telemetry::lost(&self.labels, reason);
                *current = Some(reason);
                true
            } else {
                false
            }
        });
        if first {
            tracing::warn!(target: "redlock", parent: &self.span, key = %self.keys.user, fence = self.fence, %reason, "lock lost");
        }
    }
}

impl LockGuard {
    pub(crate) fn new(client: LockClient, taken: Taken) -> Self {
        let Taken {
            keys,
            token,
            fence,
            ttl,
            sent,
            renew,
            fair,
            hold,
            labels,
        } = taken;
        let span = telemetry::hold_span(&keys.user, fence);
        let shared = Arc::new(Shared {
            client: client.clone(),
            keys,
            token,
            fence,
            renew,
            fair,
            hold,
            renewal_gate: Arc::new(tokio::sync::Mutex::new(())),
            lease: Mutex::new(Lease {
                ttl,
                sent,
                deadline: sent + client.backend().validity(ttl),
                retry_at: None,
            }),
            lost: watch::Sender::new(None),
            ended: AtomicBool::new(false),
            labels,
            acquired_at: Instant::now(),
            span,
        });
        let watch_id = client.watchdog().register(&client, Arc::clone(&shared));
        Self {
            shared,
            watch_id: Some(watch_id),
            runtime: tokio::runtime::Handle::try_current().ok(),
            released: false,
            _turn: None,
        }
    }

    /// A guard for a lock that an enclosing `run` scope of this task holds:
    /// releasing or dropping it leaves the lock to that scope, and gives
    /// `turn` back to the scope's other re-entries.
    pub(crate) fn reentrant(shared: Arc<Shared>, turn: OwnedMutexGuard<()>) -> Self {
        Self {
            shared,
            watch_id: None,
            runtime: None,
            released: false,
            _turn: Some(turn),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// True for a guard that reentered a lock held by an enclosing
    /// [`run`](crate::LockRequest::run) scope of the same task: releasing it
    /// does nothing, the outer scope releases the lock.
    pub fn is_reentrant(&self) -> bool {
        self.watch_id.is_none()
    }

    /// The lock's key, as given to [`LockClient::lock`] (without the prefix).
    pub fn key(&self) -> &str {
        &self.shared.keys.user
    }

    /// The random token (a UUID v4) that marks this owner in Redis. Release
    /// and extend act only while the key still holds it. Treat it as a
    /// secret: whoever has it can release the lock.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// The fencing token: a number that strictly increases with every
    /// acquisition of this key. Send it with every write done under the lock
    /// and have the store reject writes with a token lower than the highest
    /// it has seen; then a holder that lost its lock without knowing (a long
    /// pause) cannot overwrite the newer holder's work.
    pub fn fencing_token(&self) -> u64 {
        self.shared.fence
    }

    /// The lock's `tracing` span, `redlock.hold{key, fencing_token}`: open
    /// from the acquire to the end of the lock, with the watchdog's and the
    /// release's events inside it. Run the critical section in it (as
    /// [`LockRequest::run`](crate::LockRequest::run) does) and every event
    /// logged there carries the key and the fencing token:
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use tracing::Instrument as _;
    ///
    /// let locks = redlock_runtime::LockClient::in_memory();
    /// let guard = locks.lock("invoice:7").acquire().await?;
    /// async { tracing::info!("writing the invoice") }
    ///     .instrument(guard.span().clone())
    ///     .await;
    /// guard.release().await?;
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    pub fn span(&self) -> &Span {
        &self.shared.span
    }

    /// True while the lock is presumed held: not released, not known lost,
    /// and the lease last confirmed has not run out.
    pub fn is_held(&self) -> bool {
        !self.released && self.shared.is_held()
    }

    /// How long the lease is known to last from now (zero once released,
    /// lost or run out).
    pub fn remaining(&self) -> Duration {
        if self.released {
            return Duration::ZERO;
        }
        self.shared.remaining()
    }

    /// A future that completes when the lock is known or presumed lost,
    /// with the reason. It owns what it needs (it does not borrow the guard),
    /// so it can sit in a `select!` beside the critical section.
    ///
    /// If the guard is released or dropped first, the future never completes:
    /// the lock was not lost.
    ///
    /// ```no_run
    /// # async fn demo(client: redlock_runtime::LockClient) -> Result<(), redlock_runtime::LockError> {
    /// # async fn do_work() {}
    /// let guard = client.lock("report").acquire().await?;
    /// tokio::select! {
    ///     reason = guard.lost() => eprintln!("stopped: lock lost ({reason})"),
    ///     () = do_work() => {}
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> Lost {
        self.shared.lost_future()
    }

    /// Resets the lease to `ttl` from now (the watchdog then renews with this
    /// ttl).
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lock is no longer this guard's;
    /// [`LockError::Config`] for a ttl under 1 ms; Redis failures as in
    /// [`LockRequest::acquire`](crate::LockRequest::acquire).
    pub async fn extend(&self, ttl: Duration) -> Result<(), LockError> {
        validate_ttl("ttl", ttl)?;
        let s = &self.shared;
        if let Some(reason) = s.lost_reason() {
            return Err(self.lost_error(reason));
        }
        let sent = Instant::now();
        let limit = s.client.settings().command_timeout;
        match s
            .client
            .backend()
            .extend(&s.keys, &s.token, ttl, limit)
            .await
        {
            Ok(true) => {
                s.renewed(sent, ttl);
                s.client.watchdog().lease_changed();
                tracing::debug!(target: "redlock", key = %s.keys.user, ttl_ms = ttl.as_millis() as u64, "lock extended");
                Ok(())
            }
            Ok(false) => {
                s.mark_lost(LostReason::TokenGone);
                Err(self.lost_error(LostReason::TokenGone))
            }
            Err(e) => Err(LockClient::op_error(&s.keys.user, Operation::Extend, e)),
        }
    }

    /// Releases the lock: stops the watchdog, then deletes the key if it
    /// still holds this guard's token.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the key no longer held this guard's token
    /// (another owner's lock is never touched); Redis failures as in
    /// [`LockRequest::acquire`](crate::LockRequest::acquire), in which case
    /// the lease ends by itself within the ttl.
    pub async fn release(mut self) -> Result<(), LockError> {
        let Some(watch_id) = self.watch_id else {
            // Reentrant: the enclosing scope owns the lock.
            self.released = true;
            return Ok(());
        };
        let s = Arc::clone(&self.shared);
        // Wait out a renewal in flight, and stop renewals, before the release
        // is sent: no renewal can follow it.
        let span = telemetry::release_span(&s.span, &s.keys.user, s.fence);
        let result = async {
            let gate = s.renewal_gate.lock().await;
            s.client.watchdog().deregister(watch_id);
            let result = s.end().await;
            drop(gate);
            result
        }
        .instrument(span.clone())
        .await;
        self.released = true;
        s.set_ended();
        telemetry::held(&s.labels, s.acquired_at.elapsed());
        let _entered = span.enter();
        match result {
            Ok(true) => {
                telemetry::released(&s.labels, How::Release);
                tracing::debug!(target: "redlock", key = %s.keys.user, fence = s.fence, "lock released");
                Ok(())
            }
            Ok(false) => {
                s.mark_lost(LostReason::TokenGone);
                Err(self.lost_error(LostReason::TokenGone))
            }
            Err(e) => {
                tracing::warn!(target: "redlock", key = %s.keys.user, error = ?e, "lock release failed; the lease will run out by itself");
                Err(LockClient::op_error(&s.keys.user, Operation::Release, e))
            }
        }
    }

    fn lost_error(&self, reason: LostReason) -> LockError {
        LockError::Lost {
            key: self.shared.keys.user.clone(),
            reason,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(watch_id) = self.watch_id else {
            return; // reentrant: the enclosing scope owns the lock
        };
        self.shared.client.watchdog().deregister(watch_id);
        if self.released {
            return;
        }
        self.shared.set_ended();
        let shared = Arc::clone(&self.shared);
        telemetry::held(&shared.labels, shared.acquired_at.elapsed());
        let Some(runtime) = self.runtime.take() else {
            tracing::warn!(target: "redlock", key = %shared.keys.user, "lock guard dropped outside a tokio runtime; the lease will run out by itself");
            return;
        };
        // A release that can no longer run (the runtime shut down) just
        // leaves the lease to run out.
        let span = telemetry::release_span(&shared.span, &shared.keys.user, shared.fence);
        let release = async move {
            let _gate = shared.renewal_gate.lock().await;
            // Retried (the command was slow, the connection died) until the
            // lease would have ended anyway.
            let until = shared.lease().deadline;
            match retry_until(&shared.client, &shared.keys.user, until, |_| shared.end()).await {
                Some(true) => {
                    telemetry::released(&shared.labels, How::Drop);
                    tracing::debug!(target: "redlock", key = %shared.keys.user, "lock released on drop")
                }
                Some(false) => {
                    tracing::debug!(target: "redlock", key = %shared.keys.user, "lock dropped after it was lost")
                }
                None => {
                    tracing::warn!(target: "redlock", key = %shared.keys.user, "release on drop failed until the lease ended; it ran out by itself")
                }
            }
        };
        runtime.spawn(release.instrument(span));
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.key())
            .field("fencing_token", &self.fencing_token())
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

/// Completes when a lock is known or presumed lost; made by
/// [`LockGuard::lost`].
#[must_use = "futures do nothing unless awaited"]
pub struct Lost {
    inner: Pin<Box<dyn Future<Output = LostReason> + Send>>,
}

impl Future for Lost {
    type Output = LostReason;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<LostReason> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lost").finish_non_exhaustive()
    }
}
