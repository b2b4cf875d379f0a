//! Records in this process's memory, for an in-memory `LockClient`: the
//! same states and transitions as on Redis, for single-process services and
//! for tests of your own handlers.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;

use super::{Claim, RecordKey, Stored};

/// Expired entries are swept every this many operations.
const SWEEP_EVERY: u64 = 1024;

/// The most records kept at once: past it (after a sweep), new claims fail
/// (`503`) rather than grow the process without bound.
pub(super) const MAX_RECORDS: usize = 100_000;

#[derive(Debug, Default)]
pub(super) struct MemoryStore {
    state: Mutex<State>,
    /// Wakes every watcher on any completion or release.
    changed: Arc<Notify>,
}

#[derive(Debug, Default)]
struct State {
    records: HashMap<String, Record>,
    fences: HashMap<String, (u64, Instant)>,
    /// The largest token of a counter forgotten after its ttl: every later
    /// token is above it, so a takeover never repeats a token (on Redis the
    /// clock floor does this).
    forgotten: u64,
    ops: u64,
}

impl State {
    fn sweep(&mut self, now: Instant) {
        self.records.retain(|_, r| r.expires > now);
        let mut forgotten = self.forgotten;
        self.fences.retain(|_, (n, until)| {
            let keep = *until > now;
            if !keep {
                forgotten = forgotten.max(*n);
            }
            keep
        });
        self.forgotten = forgotten;
    }
}

#[derive(Debug)]
struct Record {
    fingerprint: String,
    expires: Instant,
    phase: Phase,
}

#[derive(Debug)]
enum Phase {
    InProgress { owner: String },
    Done(Stored),
}

impl MemoryStore {
    fn state(&self) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.ops += 1;
        if state.ops.is_multiple_of(SWEEP_EVERY) {
            state.sweep(Instant::now());
        }
        state
    }

    pub(super) fn claim(
        &self,
        key: &RecordKey,
        owner: &str,
        fingerprint: &str,
        lease: Duration,
        fence_ttl: Duration,
    ) -> Option<Claim> {
        let now = Instant::now();
        let mut state = self.state();
        if let Some(record) = state.records.get(&key.record).filter(|r| r.expires > now) {
            if record.fingerprint != fingerprint {
                return Some(Claim::Mismatch);
            }
            return Some(match &record.phase {
                Phase::InProgress { .. } => Claim::Processing {
                    lease_left: record.expires - now,
                },
                Phase::Done(stored) => Claim::Completed(stored.clone()),
            });
        }
        if state.records.len() >= MAX_RECORDS {
            state.sweep(now);
            if state.records.len() >= MAX_RECORDS {
                return None;
            }
        }
        let fence = match state.fences.get(&key.fence) {
            Some((n, until)) if *until > now => *n,
            _ => 0,
        }
        .max(state.forgotten)
            + 1;
        state
            .fences
            .insert(key.fence.clone(), (fence, now + fence_ttl));
        state.records.insert(
            key.record.clone(),
            Record {
                fingerprint: fingerprint.to_owned(),
                expires: now + lease,
                phase: Phase::InProgress {
                    owner: owner.to_owned(),
                },
            },
        );
        Some(Claim::Claimed { fence })
    }

    /// The record, if `owner` holds it and its lease is not over.
    fn owned<'a>(state: &'a mut State, key: &RecordKey, owner: &str) -> Option<&'a mut Record> {
        let now = Instant::now();
        state.records.get_mut(&key.record).filter(|r| {
            r.expires > now && matches!(&r.phase, Phase::InProgress { owner: o } if o == owner)
        })
    }

    pub(super) fn renew(&self, key: &RecordKey, owner: &str, lease: Duration) -> bool {
        let mut state = self.state();
        match Self::owned(&mut state, key, owner) {
            Some(record) => {
                record.expires = Instant::now() + lease;
                true
            }
            None => false,
        }
    }

    pub(super) fn complete(
        &self,
        key: &RecordKey,
        owner: &str,
        stored: &Stored,
        retention: Duration,
    ) -> bool {
        let mut state = self.state();
        let Some(record) = Self::owned(&mut state, key, owner) else {
            return false;
        };
        record.phase = Phase::Done(stored.clone());
        record.expires = Instant::now() + retention;
        drop(state);
        self.changed.notify_waiters();
        true
    }

    pub(super) fn release(&self, key: &RecordKey, owner: &str) -> bool {
        let mut state = self.state();
        if Self::owned(&mut state, key, owner).is_none() {
            return false;
        }
        state.records.remove(&key.record);
        drop(state);
        self.changed.notify_waiters();
        true
    }

    pub(super) fn watch(&self) -> LocalWatch {
        LocalWatch::new(Arc::clone(&self.changed))
    }
}

/// An in-memory watcher: armed before the record is read again.
pub(crate) struct LocalWatch {
    notify: Arc<Notify>,
    armed: Pin<Box<OwnedNotified>>,
}

impl LocalWatch {
    fn new(notify: Arc<Notify>) -> Self {
        let mut armed = Box::pin(Arc::clone(&notify).notified_owned());
        armed.as_mut().enable();
        Self { notify, armed }
    }

    pub(crate) async fn changed(&mut self, max: Duration) -> bool {
        let woken = tokio::time::timeout(max, self.armed.as_mut()).await.is_ok();
        *self = Self::new(Arc::clone(&self.notify));
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> RecordKey {
        RecordKey {
            record: format!("r{i}"),
            fence: format!("f{i}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn records_are_bounded_and_expired_ones_make_room() {
        let store = MemoryStore::default();
        let lease = Duration::from_secs(30);
        for i in 0..MAX_RECORDS {
            assert!(store.claim(&key(i), "o", "fp", lease, lease).is_some());
        }
        assert!(
            store
                .claim(&key(MAX_RECORDS), "o", "fp", lease, lease)
                .is_none(),
            "full: a new claim fails rather than grow without bound"
        );
        // A record already there still answers.
        assert!(matches!(
            store.claim(&key(0), "o", "fp", lease, lease),
            Some(Claim::Processing { .. })
        ));
        tokio::time::advance(lease + Duration::from_secs(1)).await;
        assert!(
            store
                .claim(&key(MAX_RECORDS), "o", "fp", lease, lease)
                .is_some(),
            "expired records were swept"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_takeover_after_the_counter_expired_gets_a_larger_token() {
        let store = MemoryStore::default();
        let short = Duration::from_millis(100);
        let Some(Claim::Claimed { fence: first }) = store.claim(&key(1), "a", "fp", short, short)
        else {
            panic!("claimed")
        };
        tokio::time::advance(Duration::from_secs(2)).await;
        // Sweep: the counter is forgotten.
        for i in 0..SWEEP_EVERY {
            store.renew(&key(2), "x", short);
            let _ = i;
        }
        let Some(Claim::Claimed { fence: second }) = store.claim(&key(1), "b", "fp", short, short)
        else {
            panic!("claimed")
        };
        assert!(second > first, "{second} after {first}");
    }
}
