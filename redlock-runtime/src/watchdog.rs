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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::{Instant, sleep_until};

use crate::backend::Renewal;
use crate::client::LockClient;
use crate::error::LostReason;
use crate::guard::Shared;
use crate::telemetry;

/// How soon a failed renewal is tried again (cut to half the lease left).
const RENEW_RETRY: Duration = Duration::from_millis(50);

/// The most locks renewed in one pipeline; more are sent in several.
const MAX_BATCH: usize = 10_000;

/// The locks a client holds, and the task renewing them.
#[derive(Debug, Default)]
pub(crate) struct Watchdog {
    state: Mutex<State>,
    /// Wakes the task when a lock is due sooner than it planned.
    wake: Notify,
}

#[derive(Debug, Default)]
struct State {
    leases: HashMap<u64, Arc<Shared>>,
    next_id: u64,
    /// Whether the task is running.
    running: bool,
    /// When the task plans to wake; `None` while it is renewing.
    next_wake: Option<Instant>,
    /// Renewal round trips sent, for tests and benchmarks.
    round_trips: u64,
}

impl Watchdog {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts watching a newly acquired lock; returns its id.
    pub(crate) fn register(&self, client: &LockClient, shared: Arc<Shared>) -> u64 {
        let due = shared.next_due();
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        state.leases.insert(id, shared);
        if !state.running {
            state.running = true;
            drop(state);
            tokio::spawn(run(client.clone()));
        } else if state.next_wake.is_some_and(|wake| due < wake) {
            drop(state);
            self.wake.notify_one();
        }
        id
    }

    /// Stops watching a lock (released, dropped or lost).
    pub(crate) fn deregister(&self, id: u64) {
        self.state().leases.remove(&id);
    }

    /// Tells the task that a lease changed (an explicit extend).
    pub(crate) fn lease_changed(&self) {
        self.wake.notify_one();
    }

    /// How many locks are watched.
    pub(crate) fn watched(&self) -> usize {
        self.state().leases.len()
    }

    /// How many renewal round trips were sent so far.
    pub(crate) fn round_trips(&self) -> u64 {
        self.state().round_trips
    }
}

/// Clears `running` if the task ends without doing so itself (its runtime
/// shut down), so that the next acquisition starts a new one.
struct Running {
    client: LockClient,
    armed: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.armed {
            let mut state = self.client.watchdog().state();
            state.running = false;
            state.next_wake = None;
        }
    }
}

/// What one wake-up found to do.
struct Plan {
    renew: Vec<(u64, Arc<Shared>)>,
    expired: Vec<(Arc<Shared>, LostReason)>,
    sleep_until: Option<Instant>,
}

fn plan(watchdog: &Watchdog, now: Instant) -> Option<Plan> {
    let mut state = watchdog.state();
    if state.leases.is_empty() {
        state.running = false;
        state.next_wake = None;
        return None;
    }
    let mut expired_ids = Vec::new();
    let mut candidates = Vec::new();
    let mut any_due = false;
    let mut next = None::<Instant>;
    for (&id, shared) in &state.leases {
        let lease = shared.lease();
        if lease.deadline <= now {
            let reason = if shared.renew {
                LostReason::Unconfirmed
            } else {
                LostReason::Expired
            };
            expired_ids.push((id, reason));
            continue;
        }
        let wake = if shared.renew {
            let period = lease.ttl / 3;
            let due = lease.retry_at.unwrap_or(lease.sent + period);
            if due <= now {
                any_due = true;
            }
            // Due within the next half period: renewed with this batch.
            if due <= now + period / 2 {
                candidates.push((id, Arc::clone(shared)));
            }
            due.min(lease.deadline)
        } else {
            lease.deadline
        };
        next = Some(next.map_or(wake, |n: Instant| n.min(wake)));
    }
    let mut expired = Vec::with_capacity(expired_ids.len());
    for (id, reason) in expired_ids {
        if let Some(shared) = state.leases.remove(&id) {
            expired.push((shared, reason));
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

async fn run(client: LockClient) {
    let mut running = Running {
        client: client.clone(),
        armed: true,
    };
    let watchdog = client.watchdog();
    loop {
        let Some(plan) = plan(watchdog, Instant::now()) else {
            // `plan` cleared `running` under the lock: a registration from
            // now on starts a new task, which this one must not undo.
            running.armed = false;
            return;
        };
        for (shared, reason) in plan.expired {
            shared.mark_lost(reason);
        }
        if plan.renew.is_empty() {
            match plan.sleep_until {
                Some(at) => {
                    tokio::select! {
                        () = sleep_until(at) => {}
                        () = watchdog.wake.notified() => {}
                    }
                }
                None => continue, // only expired leases: plan again
            }
            continue;
        }
        for chunk in plan.renew.chunks(MAX_BATCH) {
            renew(&client, chunk).await;
        }
    }
}

/// Renews one batch in one round trip, and records what came back.
async fn renew(client: &LockClient, batch: &[(u64, Arc<Shared>)]) {
    // Hold each lock's renewal gate, so a release waits for a renewal in
    // flight and none is sent after it. A lock being released is skipped.
    let mut gated: Vec<(u64, &Arc<Shared>, OwnedMutexGuard<()>)> = Vec::with_capacity(batch.len());
    for (id, shared) in batch {
        if let Ok(gate) = Arc::clone(&shared.renewal_gate).try_lock_owned() {
            gated.push((*id, shared, gate));
        }
    }
    if gated.is_empty() {
        return;
    }
    let sent = Instant::now();
    let earliest_deadline = gated
        .iter()
        .map(|(_, s, _)| s.lease().deadline)
        .min()
        .unwrap_or(sent);
    let limit = client
        .settings()
        .command_timeout
        .min(earliest_deadline.saturating_duration_since(sent))
        .max(Duration::from_millis(1));
    let renewals: Vec<Renewal<'_>> = gated
        .iter()
        .map(|(_, s, _)| Renewal {
            keys: &s.keys,
            token: &s.token,
            ttl: s.lease().ttl,
        })
        .collect();
    let result = client.backend().extend_many(&renewals, limit).await;
    client.watchdog().state().round_trips += 1;
    let now = Instant::now();
    match result {
        Ok(answers) => {
            for ((id, shared, _gate), answer) in gated.iter().zip(answers) {
                match answer {
                    Ok(true) => {
                        shared.renewed(sent, shared.lease().ttl);
                        tracing::trace!(target: "redlock", parent: &shared.span, key = %shared.keys.user, "lock renewed");
                    }
                    Ok(false) => {
                        client.watchdog().deregister(*id);
                        shared.mark_lost(LostReason::TokenGone);
                    }
                    Err(error) => retry_later(client, *id, shared, now, &error),
                }
            }
        }
        Err(error) => {
            for (id, shared, _gate) in &gated {
                retry_later(client, *id, shared, now, &error);
            }
        }
    }
}

fn retry_later(
    client: &LockClient,
    id: u64,
    shared: &Shared,
    now: Instant,
    error: &dyn std::fmt::Debug,
) {
    let lease = shared.lease();
    let left = lease.deadline.saturating_duration_since(now);
    telemetry::renew_failed(&shared.labels);
    if lease.retry_at.is_none() {
        // The first failure since the last renewal: retries follow every
        // 50 ms or so until one succeeds or the lease ends, at debug level
        // (the metric counts them all).
        tracing::warn!(target: "redlock", parent: &shared.span, key = %shared.keys.user, ?error, left_ms = left.as_millis() as u64, "lock renewal failed; retrying");
    } else {
        tracing::debug!(target: "redlock", parent: &shared.span, key = %shared.keys.user, ?error, left_ms = left.as_millis() as u64, "lock renewal failed again; retrying");
    }
    if left.is_zero() {
        client.watchdog().deregister(id);
        shared.mark_lost(LostReason::Unconfirmed);
    } else {
        shared.retry_at(now + RENEW_RETRY.min(left / 2));
    }
}
