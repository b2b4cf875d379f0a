//! [`LockGuard`]: the handle to a held lock that ends it (release, drop).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;
use tracing::{Instrument as _, Span};

use crate::backend::{Downgrade, Keys, OpError};
use crate::core::Core;
use crate::error::{LockError, LostReason, Operation};
use crate::lock::{HeldLock, Lost};
use crate::telemetry::{self, How};
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
    core: Arc<Core>,
    held: Arc<HeldLock>,
    /// The lock's id in the client's watchdog; `None` for a reentrant guard,
    /// which borrows the lock of an enclosing `run` scope of its task.
    renewal_id: Option<u64>,
    runtime: Option<tokio::runtime::Handle>,
    released: bool,
    /// A reentrant guard's turn among the re-entries of its scope (see
    /// [`LockRequest::run`](crate::LockRequest::run)): held until it is
    /// released or dropped.
    _turn: Option<OwnedMutexGuard<()>>,
}

impl LockGuard {
    /// The guard of a lock just taken: the watchdog starts renewing it.
    pub(crate) fn new(core: Arc<Core>, held: HeldLock) -> Self {
        let held = Arc::new(held);
        let renewal_id = core.track(Arc::clone(&held));
        Self {
            core,
            held,
            renewal_id: Some(renewal_id),
            runtime: tokio::runtime::Handle::try_current().ok(),
            released: false,
            _turn: None,
        }
    }

    /// A guard for a lock that an enclosing `run` scope of this task holds:
    /// releasing or dropping it leaves the lock to that scope, and gives
    /// `turn` back to the scope's other re-entries.
    pub(crate) fn reentrant(
        core: Arc<Core>,
        held: Arc<HeldLock>,
        turn: OwnedMutexGuard<()>,
    ) -> Self {
        Self {
            core,
            held,
            renewal_id: None,
            runtime: None,
            released: false,
            _turn: Some(turn),
        }
    }

    pub(crate) fn held(&self) -> &Arc<HeldLock> {
        &self.held
    }

    /// True for a guard that reentered a lock held by an enclosing
    /// [`run`](crate::LockRequest::run) scope of the same task: releasing it
    /// does nothing, the outer scope releases the lock.
    pub fn is_reentrant(&self) -> bool {
        self.renewal_id.is_none()
    }

    /// The lock's key, as given to [`LockClient::lock`](crate::LockClient::lock) (without the prefix).
    pub fn key(&self) -> &str {
        self.held.key()
    }

    /// The fencing token: a number that strictly increases with every
    /// acquisition of this key. Send it with every write done under the lock
    /// and have the store reject writes with a token lower than the highest
    /// it has seen; then a holder that lost its lock without knowing (a long
    /// pause) cannot overwrite the newer holder's work.
    ///
    /// By default the token is issued the first time it is asked for, by
    /// one script that checks this guard still holds the lock (one round
    /// trip, once: later calls return the same token at once), so locks
    /// that never need one cost a plain `SET NX`. A
    /// [`fenced`](crate::LockRequest::fenced) request (or a client built
    /// with [`fenced(true)`](crate::LockClientBuilder::fenced)), fair mode,
    /// Redlock and a read/write lock's writer issue it with the acquire, and
    /// this returns at once. Tokens increase in the order of tenure either
    /// way (see [`design`](crate::design), "Fencing tokens"). A read
    /// guard's is the last write token issued before it got in (readers
    /// share it; 0 while no writer has held the lock), returned at once.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lock is no longer this guard's (the
    /// token would protect nothing); Redis failures as for an extend.
    pub async fn fencing_token(&self) -> Result<u64, LockError> {
        if self.released {
            return Err(self.lost_error(LostReason::Released));
        }
        let limit = self.core.settings().command_timeout;
        let prefix = &self.core.settings().key_prefix;
        (self.held)
            .fencing_token(self.core.backend(), prefix, limit)
            .await
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
        self.held.span()
    }

    /// True while the lock is presumed held: not released, not known lost,
    /// and the lease last confirmed has not run out.
    pub fn is_held(&self) -> bool {
        !self.released && self.held.is_held()
    }

    /// How long the lease is known to last from now (zero once released,
    /// lost or run out).
    pub fn remaining(&self) -> Duration {
        if self.released {
            return Duration::ZERO;
        }
        self.held.remaining()
    }

    /// A future that completes when the lock is known or presumed lost,
    /// with the reason. It owns what it needs (it does not borrow the guard),
    /// so it can sit in a `select!` beside the critical section.
    ///
    /// When Redis answers that the lock is no longer this guard's, the
    /// reason costs one more read (see [`LostReason`](crate::LostReason)):
    /// this completes after it, within one command timeout, while
    /// [`is_held`](Self::is_held) says `false` from the answer on (and a
    /// body under [`run`](crate::LockRequest::run) is stopped then).
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
        self.held.lost_future()
    }

    /// Completes as soon as the lock is known lost, before why is read
    /// (see `HeldLock::refused_future`): what `run` cancels its body by.
    pub(crate) fn refused(&self) -> Lost {
        self.held.refused_future()
    }

    /// Resets the lease to `ttl` from now (the watchdog then renews with this
    /// ttl). Waits for a renewal of this lock in flight first.
    ///
    /// From when it is sent, the guard counts on no more than `ttl` (what
    /// [`remaining`](Self::remaining) says): the extend may land at once.
    /// When it fails without an answer, or this future is dropped while
    /// it is on its way, it may still land later, and the guard then
    /// counts on no more than `ttl` from each later renewal either.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lock is no longer this guard's;
    /// [`LockError::Config`] for a ttl under 1 ms; Redis failures as in
    /// [`LockRequest::acquire`](crate::LockRequest::acquire).
    pub async fn extend(&self, ttl: Duration) -> Result<(), LockError> {
        validate_ttl("ttl", ttl)?;
        let held = &self.held;
        if let Some(reason) = held.lost_reason() {
            return Err(self.lost_error(reason));
        }
        // Never in flight beside a watchdog renewal: without a script, a
        // renewal sets the lease to its ttl whatever it was (see
        // `RedisBackend::renew`), so the two must land in the order the
        // client counts them.
        let _gate = held.gate().await;
        let sent = Instant::now();
        let (backend, limit) = (self.core.backend(), self.core.settings().command_timeout);
        held.sending(sent, ttl, |t| backend.validity(t));
        self.core.watchdog().lease_changed();
        let in_flight = held.in_flight(ttl);
        let answer = backend.extend(&held.renewal(ttl), limit).await;
        if answer.is_ok() {
            in_flight.answered();
        } else {
            // Unknown: it may still land (`in_flight` dropped, below).
            drop(in_flight);
            // What is counted may have shrunk: the watchdog renews by it.
            self.core.watchdog().lease_changed();
        }
        match answer {
            Ok(true) => {
                held.renewed(sent, ttl, |t| backend.validity(t));
                self.core.watchdog().lease_changed();
                tracing::debug!(target: "redlock", key = %held.key(), ttl_ms = ttl.as_millis() as u64, "lock extended");
                Ok(())
            }
            Ok(false) => {
                let prefix = &self.core.settings().key_prefix;
                let reason = held.lose(backend, prefix, sent, limit).await;
                Err(self.lost_error(reason))
            }
            Err(e) => Err(e.into_lock_error(held.key(), Operation::Extend)),
        }
    }

    /// Releases the lock: stops the watchdog, then deletes the key if it
    /// still holds this guard's token.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the key no longer held this guard's token
    /// (another owner's lock is never touched); Redis failures as in
    /// [`LockRequest::acquire`](crate::LockRequest::acquire), after which
    /// the release is retried in the background (as a dropped guard's is)
    /// until the lease would have ended, when it ends by itself anyway.
    pub async fn release(mut self) -> Result<(), LockError> {
        let Some(renewal_id) = self.renewal_id else {
            // Reentrant: the enclosing scope owns the lock.
            self.released = true;
            return Ok(());
        };
        if self.held.ended_by_shutdown() {
            // The client's shutdown released it (see `shutdown.rs`).
            self.released = true;
            return Err(self.lost_error(LostReason::ClientShutDown));
        }
        // Borrowed, field by field: the guard's own handles serve (no
        // shared count to touch per release).
        let (core, held) = (&self.core, &self.held);
        // Wait out a renewal in flight, and stop renewals, before the release
        // is sent: no renewal can follow it.
        let span = telemetry::release_span(held.span(), held.key(), held.fence());
        let (result, sent) = async {
            let gate = held.gate().await;
            core.watchdog().deregister(renewal_id);
            let sent = Instant::now();
            let limit = core.settings().command_timeout;
            let result = held
                .end_as(core.backend(), limit, held.presumed_held_at(sent))
                .await;
            // Ended before the gate opens: a shutdown that takes the gate
            // next finds it released, not a lease to end (and mark lost).
            held.set_ended();
            drop(gate);
            (result, sent)
        }
        .instrument(span.clone())
        .await;
        self.released = true;
        telemetry::held(held.labels(), || held.held_for());
        // `Some(why)` when the store said the lock was no longer this
        // owner's (asked before the span is entered: its guard is not held
        // across an await).
        let result = match result {
            Ok(true) => Ok(None),
            Ok(false) => {
                let (backend, settings) = (core.backend(), core.settings());
                let limit = settings.command_timeout;
                let why = held.lose(backend, &settings.key_prefix, sent, limit);
                // Boxed: a release that found its lock carries none of it.
                Ok(Some(Box::pin(why.instrument(span.clone())).await))
            }
            Err(e) => Err(e),
        };
        let _entered = span.enter();
        match result {
            Ok(None) => {
                telemetry::released(held.labels(), How::Release);
                tracing::debug!(target: "redlock", key = %held.key(), fencing_token = held.issued_fence(), "lock released");
                Ok(())
            }
            Ok(Some(reason)) => Err(self.lost_error(reason)),
            Err(e) => {
                // The release may not have reached Redis, or its answer was
                // lost: it goes on from a task of its own, as a dropped
                // guard's does, so the key is not left blocked for the
                // rest of the lease.
                match self.runtime.take() {
                    Some(runtime) => {
                        tracing::warn!(target: "redlock", key = %held.key(), error = %e, "lock release failed; retrying in the background until the lease would end");
                        release_in_background(
                            &runtime,
                            Arc::clone(core),
                            Arc::clone(held),
                            How::Release,
                        );
                    }
                    None => {
                        tracing::warn!(target: "redlock", key = %held.key(), error = %e, "lock release failed; the lease will run out by itself");
                    }
                }
                Err(e.into_lock_error(held.key(), Operation::Release))
            }
        }
    }

    /// Turns this write lock into a read lock in one step, keeping the
    /// lease's ttl: no other writer can come in between, and the readers
    /// waiting for the writer are let in at once. The read guard that
    /// comes back is renewed like this one was, and keeps the fencing token
    /// of the write.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let locks = redlock_runtime::LockClient::in_memory();
    /// let product = locks.rw_lock("product:7");
    /// let write = product.write().acquire().await?;
    /// // ... write the product ...
    /// let read = write.downgrade().await?;
    /// assert!(product.read().try_acquire().await?.is_some(), "readers come in");
    /// assert!(product.write().try_acquire().await?.is_none());
    /// read.release().await?;
    /// # Ok::<(), redlock_runtime::LockError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] (`Unsupported`) for a guard that is not a
    /// write lock's own (a plain lock's, a read lock's, a reentrant one);
    /// [`LockError::Lost`] when the write lock was no longer this guard's;
    /// Redis failures as in [`release`](Self::release), after which the
    /// write lock is still held.
    pub async fn downgrade(mut self) -> Result<LockGuard, LockError> {
        let (Some(renewal_id), Keys::Write(rw)) = (self.renewal_id, self.held.keys()) else {
            return Err(crate::error::ConfigError::Unsupported {
                feature: "downgrade()",
                reason: "only the guard that took a write lock (`rw_lock(..).write()`) can be \
                         downgraded, not a plain lock's, a read lock's or a reentrant one",
            }
            .into());
        };
        let (core, held) = (Arc::clone(&self.core), Arc::clone(&self.held));
        if let Some(reason) = held.lost_reason() {
            return Err(self.lost_error(reason));
        }
        let gate = held.gate().await;
        let ttl = held.lease().ttl;
        let sent = Instant::now();
        let (backend, limit) = (core.backend(), core.settings().command_timeout);
        let downgrade = Downgrade {
            keys: rw,
            token: held.token(),
            ttl,
        };
        match backend.downgrade(&downgrade, limit).await {
            Ok(true) => {
                core.watchdog().deregister(renewal_id);
                self.released = true;
                held.set_ended();
                drop(gate);
                let read = held.downgraded(sent, backend.validity(ttl));
                tracing::debug!(target: "redlock", key = %held.key(), "write lock downgraded to read");
                Ok(LockGuard::new(core, read))
            }
            Ok(false) => {
                let prefix = &core.settings().key_prefix;
                let reason = held.lose(backend, prefix, sent, limit).await;
                Err(self.lost_error(reason))
            }
            Err(e) => Err(e.into_lock_error(held.key(), Operation::Extend)),
        }
    }

    /// Runs `op` on the held lock with renewals paused (for a record's
    /// completion or release). When it succeeds the lock is finished: no
    /// longer renewed, and not released on drop. When it fails, nothing
    /// changed: renewals go on, and a drop still releases.
    pub(crate) async fn finish_with<T, F, Fut>(&mut self, op: F) -> Result<T, OpError>
    where
        F: FnOnce(Arc<Core>, Arc<HeldLock>) -> Fut,
        Fut: Future<Output = Result<T, OpError>>,
    {
        let gate = self.held.gate().await;
        let result = op(Arc::clone(&self.core), Arc::clone(&self.held)).await;
        if result.is_ok() {
            if let Some(id) = self.renewal_id {
                self.core.watchdog().deregister(id);
            }
            self.released = true;
            self.held.set_ended();
            telemetry::held(self.held.labels(), || self.held.held_for());
        }
        drop(gate);
        result
    }

    fn lost_error(&self, reason: LostReason) -> LockError {
        LockError::Lost {
            key: self.held.key().to_owned(),
            reason,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(renewal_id) = self.renewal_id else {
            return; // reentrant: the enclosing scope owns the lock
        };
        self.core.watchdog().deregister(renewal_id);
        if self.released {
            return;
        }
        let (core, held) = (Arc::clone(&self.core), Arc::clone(&self.held));
        held.set_ended();
        if held.ended_by_shutdown() {
            return; // the client's shutdown released it
        }
        telemetry::held(held.labels(), || held.held_for());
        let Some(runtime) = self.runtime.take() else {
            tracing::warn!(target: "redlock", key = %held.key(), "lock guard dropped outside a tokio runtime; the lease will run out by itself");
            return;
        };
        release_in_background(&runtime, core, held, How::Drop);
    }
}

/// Releases `held` from a task of its own (a dropped guard, or a release
/// that failed): retried (the command was slow, the connection died) until
/// the lease would have ended anyway. A release that can no longer run
/// (the runtime shut down) just leaves the lease to run out.
fn release_in_background(
    runtime: &tokio::runtime::Handle,
    core: Arc<Core>,
    held: Arc<HeldLock>,
    how: How,
) {
    let span = telemetry::release_span(held.span(), held.key(), held.fence());
    let tracker = Arc::clone(&core);
    let release = async move {
        let _gate = held.gate().await;
        let until = held.lease().deadline;
        let end = |limit| held.end(core.backend(), limit);
        match core.retry_until(held.key(), until, end).await {
            Some(true) => {
                telemetry::released(held.labels(), how);
                tracing::debug!(target: "redlock", key = %held.key(), "lock released in the background")
            }
            Some(false) => {
                tracing::debug!(target: "redlock", key = %held.key(), "lock released in the background after it was lost")
            }
            None => {
                tracing::warn!(target: "redlock", key = %held.key(), "background release failed until the lease ended; it ran out by itself")
            }
        }
    };
    tracker.spawn_on(runtime, release.instrument(span));
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.key())
            .field("fencing_token", &self.held.issued_fence())
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}
