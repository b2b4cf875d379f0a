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
    ops: u64,
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
            let now = Instant::now();
            state.records.retain(|_, r| r.expires > now);
            state.fences.retain(|_, (_, until)| *until > now);
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
    ) -> Claim {
        let now = Instant::now();
        let mut state = self.state();
        if let Some(record) = state.records.get(&key.record).filter(|r| r.expires > now) {
            if record.fingerprint != fingerprint {
                return Claim::Mismatch;
            }
            return match &record.phase {
                Phase::InProgress { .. } => Claim::Processing {
                    lease_left: record.expires - now,
                },
                Phase::Done(stored) => Claim::Completed(stored.clone()),
            };
        }
        let fence = match state.fences.get(&key.fence) {
            Some((n, until)) if *until > now => n + 1,
            _ => 1,
        };
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
        Claim::Claimed { fence }
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
