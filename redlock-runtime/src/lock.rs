//! [`HeldLock`]: the state of one held lock, shared by its guard, the `run`
//! scopes under it and the watchdog that renews it; and [`Lost`], the
//! future that says when it was lost.
//!
//! Every fact about a held lock (its lease, whether it is held, when it is
//! next renewed, why it was lost) is computed here, once; the guard,
//! [`CurrentLock`](crate::CurrentLock) and the watchdog only ask.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{MutexGuard, Notify};
use tokio::time::Instant;
use tracing::Span;

use crate::backend::{Backend, End, Ended, IssueFence, Keys, OpError, Renewal};
use crate::error::{LockError, LostReason, Operation};
use crate::loss;
use crate::store::server::resend;
use crate::telemetry::{self, Labels};

/// What is known of a held lock's loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loss {
    /// Not known lost.
    None,
    /// The store answered that this owner no longer holds it, and why is
    /// being read (one round trip, see `loss.rs`): every view says it is
    /// not held from the answer on, not from the read. `guess` is what the
    /// call's time alone says (`TokenGone` or `Expired`).
    Reading { guess: LostReason },
    /// Lost, and why.
    Known(LostReason),
}

impl Loss {
    /// Why, once read.
    fn known(self) -> Option<LostReason> {
        match self {
            Loss::Known(reason) => Some(reason),
            Loss::None | Loss::Reading { .. } => None,
        }
    }

    /// Why it is not held: the reason read, or the guess while it is read.
    fn refused(self) -> Option<LostReason> {
        match self {
            Loss::Known(reason) | Loss::Reading { guess: reason } => Some(reason),
            Loss::None => None,
        }
    }
}

/// A lock's [`Loss`], and the wake-up of the [`Lost`] futures waiting for
/// it to change. (A `watch` channel would do the same, but costs an
/// allocation and nine locks per lock taken even when nobody asks.)
#[derive(Debug)]
struct LossCell {
    loss: Mutex<Loss>,
    changed: Notify,
}

impl Default for LossCell {
    fn default() -> Self {
        Self {
            loss: Mutex::new(Loss::None),
            changed: Notify::new(),
        }
    }
}

impl LossCell {
    fn get(&self) -> Loss {
        *self.loss.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change`; when it says it changed the state, wakes every
    /// future waiting (after `change` returned). Returns what it said.
    fn update(&self, change: impl FnOnce(&mut Loss) -> bool) -> bool {
        let changed = change(&mut self.loss.lock().unwrap_or_else(PoisonError::into_inner));
        if changed {
            self.changed.notify_waiters();
        }
        changed
    }
}

/// Marks a lock lost for its guess when dropped: a [`HeldLock::lose`]
/// whose read of why is cancelled (its caller's future dropped) still
/// ends with the lock known lost, and `lost()` completes. After the read,
/// the reason it found is already known and this changes nothing.
struct GuessOnDrop<'a> {
    held: &'a HeldLock,
    guess: LostReason,
}

impl Drop for GuessOnDrop<'_> {
    fn drop(&mut self) {
        self.held.mark_lost(self.guess);
    }
}

/// What an acquire that succeeded hands to [`HeldLock::new`].
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) keys: Keys,
    pub(crate) token: String,
    /// The fencing token, when the acquire issued it; 0: not yet (issued
    /// on first ask, see [`HeldLock::fencing_token`]).
    pub(crate) fence: u64,
    pub(crate) ttl: Duration,
    /// When the acquire that took the lock was sent.
    pub(crate) sent: Instant,
    pub(crate) renew: bool,
    pub(crate) fair: bool,
    /// Its acquire found it held by another owner first (see
    /// [`End::contended`]).
    pub(crate) contended: bool,
    pub(crate) hold: Option<Hold>,
    pub(crate) labels: Labels,
    /// The span the lock's `redlock.hold` span goes under: the caller's,
    /// beside (not inside) the acquire's.
    pub(crate) parent: Span,
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
    /// `sent + validity(ttl)`: the lease cannot end before this on the
    /// Redis side (Redis received the command after it was sent), so this
    /// process may presume the lock held until then.
    pub(crate) deadline: Instant,
    /// When the lease is to be renewed sooner than a third of its ttl
    /// after `sent`: a failed renewal tried again, or a call that shortened
    /// what is counted (see [`HeldLock::sending`]).
    pub(crate) retry_at: Option<Instant>,
    /// The shortest ttl of a renewal or extend whose answer never came:
    /// it may still land, whenever, and set the lease to it (see
    /// [`HeldLock::sending`]).
    pub(crate) doubt: Option<Duration>,
}

impl Lease {
    /// When the watchdog renews this lease: a third of the ttl counted
    /// after its last confirmed reset, or sooner after a failed renewal.
    pub(crate) fn renew_at(&self) -> Instant {
        self.retry_at
            .unwrap_or(self.sent + self.counted(self.ttl) / 3)
    }

    /// What a (re)set of the lease to `ttl` lets this process count on:
    /// no more than a call whose answer never came could leave.
    fn counted(&self, ttl: Duration) -> Duration {
        self.doubt.map_or(ttl, |doubt| doubt.min(ttl))
    }
}

/// A renewal or extend on its way (see [`HeldLock::in_flight`]).
pub(crate) struct InFlight<'a> {
    held: &'a HeldLock,
    ttl: Duration,
    answered: bool,
}

impl InFlight<'_> {
    /// The call was answered: its outcome is known.
    pub(crate) fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.held.outcome_unknown(self.ttl);
        }
    }
}

/// One held lock. Fields are private: the guard, the scopes and the
/// watchdog go through the methods below.
pub(crate) struct HeldLock {
    /// The id of the client core that took it (reentrancy is per client).
    client: u64,
    keys: Keys,
    token: String,
    /// The fencing token; 0 until it is issued.
    fence: AtomicU64,
    /// One issue of the fencing token at a time.
    issuing: tokio::sync::Mutex<()>,
    /// Whether the watchdog renews the lease (else it only watches it end).
    renew: bool,
    /// Taken in fair mode: the release wakes the first waiter in line.
    fair: bool,
    /// Its acquire found it held by another owner first (see
    /// [`End::contended`]).
    contended: bool,
    /// The minimum hold, and the acquire time on the store's clock.
    hold: Option<Hold>,
    /// Held by the watchdog while a renewal of this lock is in flight, and
    /// by the release: no renewal is sent after a release.
    gate: tokio::sync::Mutex<()>,
    lease: Mutex<Lease>,
    /// Whether, and why, it is lost; every [`Lost`] future waits on it.
    lost: LossCell,
    /// Set once the owning guard released or dropped the lock: every view
    /// of it (reentrant guards, [`CurrentLock`](crate::CurrentLock)) then
    /// says it is not held.
    ended: AtomicBool,
    /// The metrics' labels.
    labels: Labels,
    /// When the acquire returned (for the hold-time histogram).
    acquired_at: Instant,
    /// `redlock.hold{key, fencing_token}`: open while the lock is held.
    span: Span,
}

impl fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldLock")
            .field("key", &self.keys.user())
            .field("fence", &self.issued_fence())
            .field("renew", &self.renew)
            .finish_non_exhaustive()
    }
}

impl HeldLock {
    /// The lock `taken` by the client core `client`; `validity` is how long
    /// after a confirmed (re)set the lease may be presumed to last.
    pub(crate) fn new(client: u64, taken: Taken, validity: Duration) -> Self {
        let Taken {
            keys,
            token,
            fence,
            ttl,
            sent,
            renew,
            fair,
            contended,
            hold,
            labels,
            parent,
        } = taken;
        let span = telemetry::hold_span(&parent, keys.user(), fence);
        Self {
            client,
            keys,
            token,
            fence: AtomicU64::new(fence),
            issuing: tokio::sync::Mutex::new(()),
            renew,
            fair,
            contended,
            hold,
            gate: tokio::sync::Mutex::new(()),
            lease: Mutex::new(Lease {
                ttl,
                sent,
                deadline: sent + validity,
                retry_at: None,
                doubt: None,
            }),
            lost: LossCell::default(),
            ended: AtomicBool::new(false),
            labels,
            acquired_at: Instant::now(),
            span,
        }
    }

    /// The read lock this write lock became (same key, token and fencing
    /// token), its lease confirmed at `sent`.
    pub(crate) fn downgraded(&self, sent: Instant, validity: Duration) -> Self {
        let keys = match &self.keys {
            Keys::Write(rw) => Keys::Read(rw.clone()),
            other => other.clone(),
        };
        let taken = Taken {
            keys,
            token: self.token.clone(),
            fence: self.fence(),
            ttl: self.lease().ttl,
            sent,
            renew: self.renew,
            fair: false,
            contended: false,
            hold: None,
            labels: self.labels.clone(),
            parent: Span::current(),
        };
        Self::new(self.client, taken, validity)
    }

    /// The id of the client core that holds it.
    pub(crate) fn client(&self) -> u64 {
        self.client
    }

    /// The key as the user gave it.
    pub(crate) fn key(&self) -> &str {
        self.keys.user()
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The owner token: a secret (whoever has it can release the lock).
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The fencing token if issued, else 0.
    pub(crate) fn fence(&self) -> u64 {
        self.fence.load(Ordering::Acquire)
    }

    /// The fencing token, if it was issued.
    pub(crate) fn issued_fence(&self) -> Option<u64> {
        Some(self.fence()).filter(|&f| f > 0)
    }

    /// The fencing token: issued with the acquire (a fenced request, fair
    /// mode, Redlock, a read/write lock's writer), or now, the first time
    /// it is asked for, by a script that checks this owner still holds the
    /// lock (see `design`, "Fencing tokens"). Later asks return the
    /// same token.
    pub(crate) async fn fencing_token(
        &self,
        backend: &Backend,
        prefix: &str,
        limit: Duration,
    ) -> Result<u64, LockError> {
        if let Some(fence) = self.issued_fence() {
            return Ok(fence);
        }
        let _one = self.issuing.lock().await;
        if let Some(fence) = self.issued_fence() {
            return Ok(fence);
        }
        let lost = |reason| LockError::Lost {
            key: self.keys.user().to_owned(),
            reason,
        };
        if let Some(reason) = self.reentry_refused() {
            return Err(lost(reason));
        }
        // Only a plain lock issues its token on first ask. A writer's came
        // with its acquire; a reader's is the last write token issued
        // before it got in, 0 while no writer has held the lock (there is
        // no writer's token for the issue script to find: it would call
        // the read lock lost). Permits carry none.
        let Keys::Lock(keys) = &self.keys else {
            return Ok(self.fence());
        };
        let issue = IssueFence {
            keys,
            token: &self.token,
        };
        let sent = Instant::now();
        match backend.issue_fence(&issue, limit).await {
            Ok(Some(fence)) => {
                self.fence.store(fence, Ordering::Release);
                self.span.record("fencing_token", fence);
                Ok(fence)
            }
            Ok(None) => Err(lost(self.lose(backend, prefix, sent, limit).await)),
            Err(e) => Err(e.into_lock_error(self.keys.user(), Operation::Fence)),
        }
    }

    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    pub(crate) fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Whether the watchdog renews the lease.
    pub(crate) fn renews(&self) -> bool {
        self.renew
    }

    /// How long since the acquire returned.
    pub(crate) fn held_for(&self) -> Duration {
        self.acquired_at.elapsed()
    }

    pub(crate) fn lease(&self) -> Lease {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the watchdog next has to look at this lock: its renewal, or
    /// (not renewed) the end of its lease.
    pub(crate) fn next_wake(&self, lease: &Lease) -> Instant {
        if self.renew {
            lease.renew_at().min(lease.deadline)
        } else {
            lease.deadline
        }
    }

    /// Why the lock is presumed lost when its lease ran out unconfirmed.
    pub(crate) fn ran_out(&self) -> LostReason {
        if self.renew {
            LostReason::Unconfirmed
        } else {
            LostReason::Expired
        }
    }

    /// A renewal or extend to `ttl` goes out at `sent`.
    ///
    /// It may land at once, and without a script (`SET .. IFEQ .. PX`,
    /// `primitive/lock/conditional.rs`) it sets the lease to its ttl
    /// whatever was left, as an extend to a shorter ttl does with the
    /// script too: from now on this process counts on no more than it
    /// leaves. With the renewal gate (a manual extend and the watchdog
    /// are never in flight together) and [`outcome_unknown`](Self::outcome_unknown),
    /// this keeps what the process presumes within what Redis keeps,
    /// whatever order the calls land in: checked by the model
    /// `model/src/extend.rs` (`COUNTED_LEASE_HELD`), whose variants
    /// without either rule have counterexamples.
    pub(crate) fn sending(
        &self,
        sent: Instant,
        ttl: Duration,
        validity: impl Fn(Duration) -> Duration,
    ) {
        let mut lease = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        let leaves = sent + validity(lease.counted(ttl));
        if leaves < lease.deadline {
            lease.deadline = leaves;
            // Renewed by a third of what is left, as from a confirmation,
            // should the call's answer not come.
            let due = sent + leaves.saturating_duration_since(sent) / 3;
            lease.retry_at = Some(lease.retry_at.map_or(due, |at| at.min(due)));
        }
    }

    /// A call to `ttl` about to be sent: unless it is
    /// [`answered`](InFlight::answered), its outcome is unknown when the
    /// guard drops (a timeout, an error, or the caller's future dropped
    /// while it was on its way): see [`outcome_unknown`](Self::outcome_unknown).
    pub(crate) fn in_flight(&self, ttl: Duration) -> InFlight<'_> {
        InFlight {
            held: self,
            ttl,
            answered: false,
        }
    }

    /// A renewal or extend to `ttl` got no answer (its outcome is
    /// unknown): it may land at any later time, so every later
    /// confirmation counts no more than `ttl` (see [`sending`](Self::sending)).
    pub(crate) fn outcome_unknown(&self, ttl: Duration) {
        let mut lease = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        lease.doubt = Some(lease.doubt.map_or(ttl, |doubt| doubt.min(ttl)));
    }

    /// Records a confirmed (re)set of the lease to `ttl` sent at `sent`
    /// (valid for `validity` of the ttl counted from then), unless a later
    /// one was already recorded.
    pub(crate) fn renewed(
        &self,
        sent: Instant,
        ttl: Duration,
        validity: impl Fn(Duration) -> Duration,
    ) {
        let mut lease = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        if sent >= lease.sent {
            let counted = lease.counted(ttl);
            *lease = Lease {
                ttl,
                sent,
                deadline: sent + validity(counted),
                retry_at: None,
                doubt: lease.doubt,
            };
        }
    }

    /// Has the watchdog renew the lease at once: a lock a fair release
    /// handed over, whose lease is what was left of the waiter's presence
    /// in the line rather than its ttl.
    pub(crate) fn renew_now(&self) {
        self.retry_at(Instant::now());
    }

    /// Schedules the next renewal attempt after a failure.
    pub(crate) fn retry_at(&self, at: Instant) {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retry_at = Some(at);
    }

    /// What the watchdog sends to renew it.
    pub(crate) fn renewal(&self, ttl: Duration) -> Renewal<'_> {
        Renewal {
            keys: &self.keys,
            token: &self.token,
            ttl,
        }
    }

    /// The renewal gate, if no renewal or release holds it.
    pub(crate) fn try_gate(&self) -> Option<MutexGuard<'_, ()>> {
        self.gate.try_lock().ok()
    }

    /// The renewal gate: waits out a renewal in flight.
    pub(crate) async fn gate(&self) -> MutexGuard<'_, ()> {
        self.gate.lock().await
    }

    /// Why the lock was lost, once known.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.lost.get().known()
    }

    /// Not released, not known lost, and the lease last confirmed has not
    /// run out.
    pub(crate) fn is_held(&self) -> bool {
        self.refused_at(Instant::now()).is_none()
    }

    /// How long the lease is known to last from now (zero once not held).
    pub(crate) fn remaining(&self) -> Duration {
        let now = Instant::now();
        if self.refused_at(now).is_some() {
            return Duration::ZERO;
        }
        self.lease().deadline.saturating_duration_since(now)
    }

    /// Marks the lock released by its owner (every view then says so).
    pub(crate) fn set_ended(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Why a re-entry into this lock must fail, if it must: the lock was
    /// released, lost, or its lease ran out.
    pub(crate) fn reentry_refused(&self) -> Option<LostReason> {
        self.refused_at(Instant::now())
    }

    fn refused_at(&self, now: Instant) -> Option<LostReason> {
        if self.ended.load(Ordering::Acquire) {
            return Some(LostReason::Released);
        }
        if let Some(reason) = self.lost.get().refused() {
            return Some(reason);
        }
        (now >= self.lease().deadline).then(|| self.ran_out())
    }

    /// A future that completes when the lock is known or presumed lost,
    /// with why.
    pub(crate) fn lost_future(self: &Arc<Self>) -> Lost {
        self.loss_future(Loss::known)
    }

    /// A future that completes as soon as the lock is known lost, before
    /// why is read: what a body run under the lock is cancelled by. Its
    /// reason is the guess the call's time gives; [`lost_future`](Self::lost_future)
    /// then completes with the one read, within one command timeout.
    pub(crate) fn refused_future(self: &Arc<Self>) -> Lost {
        self.loss_future(Loss::refused)
    }

    /// Completes once `done` finds a reason in the loss state; never for a
    /// lock that ends without being lost.
    fn loss_future(self: &Arc<Self>, done: fn(Loss) -> Option<LostReason>) -> Lost {
        let held = Arc::clone(self);
        Lost {
            inner: Box::pin(async move {
                loop {
                    let changed = held.lost.changed.notified();
                    tokio::pin!(changed);
                    // Enabled before the state is read: a change made after
                    // the read still wakes this future.
                    changed.as_mut().enable();
                    if let Some(reason) = done(held.lost.get()) {
                        return reason;
                    }
                    changed.await;
                }
            }),
        }
    }

    /// Marks the lock lost after the store answered, to a call sent at
    /// `sent`, that this owner no longer holds it: at once (see
    /// [`refused_future`](Self::refused_future)), then with why, once read
    /// (see `loss.rs`); returns why, or the reason already known.
    pub(crate) async fn lose(
        &self,
        backend: &Backend,
        prefix: &str,
        sent: Instant,
        limit: Duration,
    ) -> LostReason {
        if let Some(known) = self.lost_reason() {
            return known;
        }
        let guess = self.refuse(sent);
        let _cancelled = GuessOnDrop { held: self, guess };
        let found = loss::Found {
            keys: &self.keys,
            token: &self.token,
            prefix,
            in_lease: guess == LostReason::TokenGone,
        };
        let reason = loss::why(backend, found, limit).await;
        self.mark_lost(reason);
        self.lost_reason().unwrap_or(reason)
    }

    /// Marks the lock known lost, why not yet read, after the store
    /// answered that this owner no longer holds it to a call sent at
    /// `sent`: every view says it is not held from now on, and a body run
    /// under it is cancelled (see [`refused_future`](Self::refused_future)).
    /// Returns the guess: `TokenGone` when the lease was still presumed
    /// held when the call went out, else `Expired`.
    pub(crate) fn refuse(&self, sent: Instant) -> LostReason {
        let guess = if sent < self.lease().deadline {
            LostReason::TokenGone
        } else {
            LostReason::Expired
        };
        self.lost.update(|current| {
            let first = *current == Loss::None;
            if first {
                *current = Loss::Reading { guess };
            }
            first
        });
        guess
    }

    /// Marks the lock ended by the client's shutdown, which releases it
    /// next: every view says it is not held, and a body run under it is
    /// cancelled, before the release goes out. Not a loss the metrics count
    /// (the release is). False when it was already known lost.
    pub(crate) fn end_by_shutdown(&self) -> bool {
        self.lost.update(|current| {
            if let Loss::Known(_) = current {
                false
            } else {
                *current = Loss::Known(LostReason::ClientShutDown);
                true
            }
        })
    }

    /// Whether the client's shutdown ended the lock.
    pub(crate) fn ended_by_shutdown(&self) -> bool {
        self.lost_reason() == Some(LostReason::ClientShutDown)
    }

    /// Whether the owning guard released or dropped the lock.
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Marks the lock lost for `reason` (once: a reason known stays) and
    /// wakes every [`Lost`] future.
    pub(crate) fn mark_lost(&self, reason: LostReason) {
        let first = self.lost.update(|current| {
            if let Loss::Known(_) = current {
                false
            } else {
                // Counted before anyone waiting on `lost()` wakes.
                telemetry::lost(&self.labels, reason);
                *current = Loss::Known(reason);
                true
            }
        });
        if first {
            tracing::warn!(target: "redlock", parent: &self.span, key = %self.keys.user(), fencing_token = self.issued_fence(), %reason, "lock lost");
        }
    }

    /// Ends the lock on the store: deletes it, or, with a minimum hold not
    /// yet over, leaves it to expire when the hold ends. `Ok(false)` when
    /// the lock no longer held this owner's token.
    ///
    /// An answer of "not the owner" that came to a call sent again after a
    /// send whose outcome is unknown is no proof of loss: while the lease
    /// was presumed held when the end went out, the end counts as done
    /// (see `design`, "A lost answer is not a lost lock").
    pub(crate) async fn end(&self, backend: &Backend, limit: Duration) -> Result<bool, OpError> {
        self.end_as(backend, limit, self.presumed_held_at(Instant::now()))
            .await
    }

    /// Whether this process presumes the lease held at `at`: not found
    /// lost, and its deadline not passed.
    pub(crate) fn presumed_held_at(&self, at: Instant) -> bool {
        self.lost.get() == Loss::None && at < self.lease().deadline
    }

    /// [`end`](Self::end), with whether the lease was presumed held when
    /// the work under it ended (see [`presumed_held`](Self::presumed_held)).
    pub(crate) async fn end_as(
        &self,
        backend: &Backend,
        limit: Duration,
        presumed_held: bool,
    ) -> Result<bool, OpError> {
        let end = End {
            keys: &self.keys,
            token: &self.token,
            fence: self.fence(),
            fair: self.fair,
            hold: self.hold.map(|h| (h.at_ms, h.min)),
            contended: self.contended,
        };
        let (ended, resent) = resend::track(backend.end(&end, limit)).await;
        let ended = ended?;
        if ended == Ended::HeldUntilMinimum {
            tracing::debug!(target: "redlock", key = %self.keys.user(), "lock kept until its minimum hold ends");
        }
        if ended == Ended::NotOwner && resent && presumed_held {
            tracing::debug!(target: "redlock", key = %self.keys.user(), "the release's answer was lost and its re-send found the lock gone: taken as released, the lease was held until the release went out");
            return Ok(true);
        }
        Ok(ended != Ended::NotOwner)
    }
}

/// Why a lock known lost was lost: `lost`'s reason, read within one
/// `command_timeout` (see `HeldLock::lose`), else `guess` (the read never
/// came back).
pub(crate) async fn reason_within(
    lost: Lost,
    guess: LostReason,
    command_timeout: Duration,
) -> LostReason {
    // The read is bounded by the command timeout; the margin is for its
    // task to be scheduled on a loaded runtime.
    let limit = command_timeout * 2 + Duration::from_millis(100);
    tokio::time::timeout(limit, lost).await.unwrap_or(guess)
}

/// Completes when a lock is known or presumed lost; made by
/// [`LockGuard::lost`](crate::LockGuard::lost) and
/// [`CurrentLock::lost`](crate::CurrentLock::lost).
#[must_use = "futures do nothing unless awaited"]
pub struct Lost {
    inner: Pin<Box<dyn Future<Output = LostReason> + Send>>,
}

impl Lost {
    /// Completes when the first of `all` does (a multi-lock is lost when
    /// any of its locks is); never when `all` is empty.
    pub(crate) fn any(all: Vec<Lost>) -> Lost {
        Lost {
            inner: Box::pin(async move {
                if all.is_empty() {
                    return std::future::pending().await;
                }
                futures_util::future::select_all(all).await.0
            }),
        }
    }
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
