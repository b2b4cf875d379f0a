//! The watchdog: one task per client that renews every held lock, in
//! batches, and notices when a lock is lost.
//!
//! Each held lock is *due* for renewal a third of its ttl after its lease
//! was last confirmed. When the task wakes for the earliest due lock, it
//! renews, in one pipelined round trip, every lock that would be due within
//! the next half period as well. Locks therefore fall into at most two
//! cohorts per period: 10,000 locks taken at random times cost at most two
//! round trips per renewal period, not 10,000 timers and round trips. Each
//! lease is renewed after between a sixth and a third of its ttl.
//!
//! A renewal that finds the token gone marks the lock lost at once; one that
//! fails is retried (every 50 ms at most) until the lease, as last
//! confirmed, would run out, and then the lock is presumed lost. A lock
//! taken without renewal is presumed lost when its lease runs out.
//!
//! The task runs while the client holds locks, and ends when the last one is
//! released; the next acquisition starts it again.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::{MutexGuard, Notify};
use tokio::time::Instant;

use crate::backend::{Backend, Renewal};
use crate::error::LostReason;
use crate::lock::HeldLock;
use crate::telemetry;

/// How soon a failed renewal is tried again (cut to half the lease left).
const RENEW_RETRY: Duration = Duration::from_millis(50);

/// How long the watchdog waits before it looks again at due locks that are
/// all being released or finished (see [`renew`]).
pub(crate) const RELEASING_PAUSE: Duration = RENEW_RETRY;

/// The most locks renewed in one pipeline; more are sent in several.
pub(crate) const MAX_BATCH: usize = 10_000;

/// The locks a client holds; the task that renews them is the core's
/// (`core::run_watchdog`), which calls [`Watchdog::plan`] and [`renew`].
#[derive(Debug, Default)]
pub(crate) struct Watchdog {
    state: Mutex<State>,
    /// Wakes the task when a lock is due sooner than it planned.
    wake: Arc<Notify>,
}

#[derive(Debug, Default)]
struct State {
    leases: HashMap<u64, Arc<HeldLock>, BuildHasherDefault<IdHasher>>,
    next_id: u64,
    /// Whether the task is running.
    running: bool,
    /// When the task plans to wake; `None` while it is renewing.
    next_wake: Option<Instant>,
    /// Renewal round trips sent, for tests and benchmarks.
    round_trips: u64,
}

/// What one wake-up found to do.
/// Hashes the lease ids, sequential numbers the watchdog hands out itself
/// (nothing an attacker picks, so no SipHash needed): a multiplication by
/// an odd constant spreads them over the table. Every lock taken and
/// released registers and deregisters once, under the lock of `State`.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Debug)]
pub(crate) struct Plan {
    /// Due now, or within the next half period: renewed together.
    pub(crate) renew: Vec<(u64, Arc<HeldLock>)>,
    /// Leases that ran out unconfirmed, with the reason to give.
    pub(crate) expired: Vec<(Arc<HeldLock>, LostReason)>,
    /// When the next lock is due.
    pub(crate) sleep_until: Option<Instant>,
}

impl Watchdog {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts watching a newly acquired lock: its id, and whether the task
    /// must be started (none runs).
    pub(crate) fn register(&self, held: Arc<HeldLock>) -> (u64, bool) {
        let due = held.next_wake(&held.lease());
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        state.leases.insert(id, held);
        if !state.running {
            state.running = true;
            return (id, true);
        }
        if state.next_wake.is_some_and(|wake| due < wake) {
            drop(state);
            self.wake.notify_one();
        }
        (id, false)
    }

    /// Stops watching a lock (released, dropped or lost).
    pub(crate) fn deregister(&self, id: u64) {
        self.state().leases.remove(&id);
    }

    /// Tells the task that a lease changed (an explicit extend).
    pub(crate) fn lease_changed(&self) {
        self.wake.notify_one();
    }

    /// Completes when the task is to plan again before its sleep ends.
    pub(crate) fn woken(&self) -> OwnedNotified {
        Arc::clone(&self.wake).notified_owned()
    }

    /// The task ended without planning its end (its runtime shut down).
    pub(crate) fn stopped(&self) {
        let mut state = self.state();
        state.running = false;
        state.next_wake = None;
    }

    /// How many locks are watched.
    pub(crate) fn watched(&self) -> usize {
        self.state().leases.len()
    }

    /// Every lock watched now, in the order they were taken.
    pub(crate) fn snapshot(&self) -> Vec<Arc<HeldLock>> {
        self.books().into_iter().map(|(_, held)| held).collect()
    }

    /// Every lock watched now, with its id here, in the order they were
    /// taken.
    pub(crate) fn books(&self) -> Vec<(u64, Arc<HeldLock>)> {
        let state = self.state();
        let mut leases: Vec<_> = state
            .leases
            .iter()
            .map(|(id, held)| (*id, Arc::clone(held)))
            .collect();
        leases.sort_unstable_by_key(|(id, _)| *id);
        leases
    }

    #[cfg(feature = "test-util")]
    /// How many renewal round trips were sent so far.
    pub(crate) fn round_trips(&self) -> u64 {
        self.state().round_trips
    }

    /// What to do at `now`: which locks to renew in one batch, which leases
    /// ran out, when to wake next. `None` (and the task is marked stopped)
    /// when no lock is held.
    pub(crate) fn plan(&self, now: Instant) -> Option<Plan> {
        let mut state = self.state();
        if state.leases.is_empty() {
            state.running = false;
            state.next_wake = None;
            return None;
        }
        let mut expired_ids = Vec::new();
        let mut candidates = Vec::new();
        let mut any_due = false;
        let mut next = None::<Instant>;
        for (&id, held) in &state.leases {
            let lease = held.lease();
            if lease.deadline <= now {
                expired_ids.push((id, held.ran_out()));
                continue;
            }
            if held.renews() {
                let due = lease.renew_at();
                any_due |= due <= now;
                // Due within the next half period: renewed with this batch.
                if due <= now + lease.ttl / 6 {
                    candidates.push((id, Arc::clone(held)));
                }
            }
            let wake = held.next_wake(&lease);
            next = Some(next.map_or(wake, |n: Instant| n.min(wake)));
        }
        let mut expired = Vec::with_capacity(expired_ids.len());
        for (id, reason) in expired_ids {
            if let Some(held) = state.leases.remove(&id) {
                expired.push((held, reason));
            }
        }
        let renew = if any_due { candidates } else { Vec::new() };
        state.next_wake = if renew.is_empty() { next } else { None };
        Some(Plan {
            renew,
            expired,
            sleep_until: next,
        })
    }
}

/// What one batch's renewal came back with.
#[derive(Default)]
pub(crate) struct Renewed {
    /// Whether a round trip was sent (see [`renew`]).
    pub(crate) sent: bool,
    /// The locks the store said are no longer this owner's, each with
    /// when its renewal was sent: no longer renewed, and to be marked lost
    /// with the reason [`HeldLock::lose`] finds, which costs a read, off
    /// the watchdog's loop.
    pub(crate) gone: Vec<(Arc<HeldLock>, Instant)>,
}

/// Renews one batch in one round trip, and records what came back.
/// Nothing is sent when every lock of the batch is being
/// released or finished (its gate is held), and that release decides its
/// fate. The caller must not plan again at once then: the locks are still
/// due, and a loop that finds them so without ever waiting would hold its
/// worker thread until the release ends, starving the very task that
/// releases (issue 32: a record's completion with Redis down waited for
/// its whole lease).
pub(crate) async fn renew(
    backend: &Backend,
    command_timeout: Duration,
    watchdog: &Watchdog,
    batch: &[(u64, Arc<HeldLock>)],
) -> Renewed {
    // Hold each lock's renewal gate, so a release waits for a renewal in
    // flight and none is sent after it. A lock being released is skipped.
    let gated: Vec<(u64, &Arc<HeldLock>, MutexGuard<'_, ()>)> = batch
        .iter()
        .filter_map(|(id, held)| held.try_gate().map(|gate| (*id, held, gate)))
        .collect();
    if gated.is_empty() {
        return Renewed::default();
    }
    let sent = Instant::now();
    let leases: Vec<_> = gated.iter().map(|(_, held, _)| held.lease()).collect();
    let earliest_deadline = leases.iter().map(|l| l.deadline).min().unwrap_or(sent);
    let limit = command_timeout
        .min(earliest_deadline.saturating_duration_since(sent))
        .max(Duration::from_millis(1));
    let renewals: Vec<Renewal<'_>> = gated
        .iter()
        .zip(&leases)
        .map(|((_, held, _), lease)| {
            held.sending(sent, lease.ttl, |t| backend.validity(t));
            held.renewal(lease.ttl)
        })
        .collect();
    let result = backend.extend_many(&renewals, limit).await;
    watchdog.state().round_trips += 1;
    let now = Instant::now();
    let mut gone = Vec::new();
    match result {
        Ok(answers) => {
            for (((id, held, _gate), lease), answer) in gated.iter().zip(&leases).zip(answers) {
                match answer {
                    Ok(true) => {
                        held.renewed(sent, lease.ttl, |t| backend.validity(t));
                        tracing::trace!(target: "redlock", parent: held.span(), key = %held.key(), "lock renewed");
                    }
                    Ok(false) => {
                        watchdog.deregister(*id);
                        gone.push((Arc::clone(held), sent));
                    }
                    Err(error) => {
                        held.outcome_unknown(lease.ttl);
                        retry_later(watchdog, *id, held, now, &error);
                    }
                }
            }
        }
        Err(error) => {
            for ((id, held, _gate), lease) in gated.iter().zip(&leases) {
                held.outcome_unknown(lease.ttl);
                retry_later(watchdog, *id, held, now, &error);
            }
        }
    }
    Renewed { sent: true, gone }
}

fn retry_later(
    watchdog: &Watchdog,
    id: u64,
    held: &HeldLock,
    now: Instant,
    error: &dyn std::fmt::Display,
) {
    let lease = held.lease();
    let left = lease.deadline.saturating_duration_since(now);
    telemetry::renew_failed(held.labels());
    if lease.retry_at.is_none() {
        // The first failure since the last renewal: retries follow every
        // 50 ms or so until one succeeds or the lease ends, at debug level
        // (the metric counts them all).
        tracing::warn!(target: "redlock", parent: held.span(), key = %held.key(), %error, left_ms = left.as_millis() as u64, "lock renewal failed; retrying");
    } else {
        tracing::debug!(target: "redlock", parent: held.span(), key = %held.key(), %error, left_ms = left.as_millis() as u64, "lock renewal failed again; retrying");
    }
    if left.is_zero() {
        watchdog.deregister(id);
        held.mark_lost(LostReason::Unconfirmed);
    } else {
        held.retry_at(now + RENEW_RETRY.min(left / 2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Keys, LockKeys};
    use crate::lock::Taken;
    use crate::telemetry::Labels;

    fn held(ttl_ms: u64, sent: Instant, renew: bool) -> Arc<HeldLock> {
        let ttl = Duration::from_millis(ttl_ms);
        let taken = Taken {
            keys: Keys::Lock(LockKeys::new("lock:", format!("k{ttl_ms}"))),
            token: "t".to_owned(),
            fence: 1,
            ttl,
            sent,
            renew,
            fair: false,
            contended: false,
            hold: None,
            labels: Labels::for_tests(),
            parent: tracing::Span::current(),
        };
        Arc::new(HeldLock::new(1, taken, ttl))
    }

    #[tokio::test(start_paused = true)]
    async fn locks_due_within_half_a_period_are_renewed_in_one_batch() {
        let watchdog = Watchdog::default();
        let t0 = Instant::now();
        // ttl 3 s: due at 1 s. Taken at t0, t0 + 100 ms (due within the
        // half period of the first) and t0 + 600 ms (not).
        for (i, offset) in [0u64, 100, 600].into_iter().enumerate() {
            let h = held(3000 + i as u64, t0 + Duration::from_millis(offset), true);
            watchdog.register(h);
        }
        let plan = watchdog
            .plan(t0 + Duration::from_millis(500))
            .expect("locks held");
        assert!(plan.renew.is_empty(), "nothing due yet");
        assert_eq!(plan.sleep_until, Some(t0 + Duration::from_millis(1000)));
        let plan = watchdog
            .plan(t0 + Duration::from_millis(1000))
            .expect("locks held");
        assert_eq!(
            plan.renew.len(),
            2,
            "the first and the one due 100 ms later"
        );
        assert!(plan.expired.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_that_ran_out_is_lost_with_the_right_reason() {
        let watchdog = Watchdog::default();
        let t0 = Instant::now();
        watchdog.register(held(1000, t0, true));
        watchdog.register(held(2000, t0, false));
        let plan = watchdog
            .plan(t0 + Duration::from_millis(2500))
            .expect("locks held");
        let mut reasons: Vec<_> = plan.expired.iter().map(|(_, r)| *r).collect();
        reasons.sort_by_key(|r| r.to_string());
        assert_eq!(reasons.len(), 2);
        assert!(
            reasons.contains(&LostReason::Unconfirmed),
            "renewed: unconfirmed"
        );
        assert!(
            reasons.contains(&LostReason::Expired),
            "not renewed: expired"
        );
        assert_eq!(watchdog.watched(), 0, "expired leases stop being watched");
        assert!(
            watchdog.plan(t0 + Duration::from_secs(3)).is_none(),
            "the task ends"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_without_renewal_is_only_watched_until_its_deadline() {
        let watchdog = Watchdog::default();
        let t0 = Instant::now();
        watchdog.register(held(900, t0, false));
        let plan = watchdog
            .plan(t0 + Duration::from_millis(400))
            .expect("held");
        assert!(plan.renew.is_empty(), "never renewed");
        assert_eq!(plan.sleep_until, Some(t0 + Duration::from_millis(900)));
    }
}
