//! Idempotency records in this process's memory, for an in-memory (or
//! Redlock) client: the same states and transitions as the `RECORD_*`
//! scripts on Redis.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::{Claim, Claimed, Completion, RecordKeys};

/// Expired entries are swept every this many operations.
const SWEEP_EVERY: u64 = 1024;

/// The most records kept at once: past it (after a sweep), new claims fail
/// rather than grow the process without bound.
pub(crate) const MAX_RECORDS: usize = 100_000;

#[derive(Debug, Default)]
pub(crate) struct MemoryRecords {
    state: Mutex<State>,
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

    /// The record, if `owner` holds it and its lease is not over.
    fn owned(&mut self, keys: &RecordKeys, owner: &str) -> Option<&mut Record> {
        let now = Instant::now();
        self.records.get_mut(&keys.record).filter(|r| {
            r.expires > now && matches!(&r.phase, Phase::InProgress { owner: o } if o == owner)
        })
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
    Done(Completion),
}

impl MemoryRecords {
    fn state(&self) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.ops += 1;
        if state.ops.is_multiple_of(SWEEP_EVERY) {
            state.sweep(Instant::now());
        }
        state
    }

    /// absent -> in progress, or what is there; `None` when full.
    pub(crate) fn claim(&self, claim: &Claim<'_>) -> Option<Claimed<u64>> {
        let Claim {
            keys,
            token,
            fingerprint,
            lease,
            fence_ttl,
        } = *claim;
        let now = Instant::now();
        let mut state = self.state();
        if let Some(record) = state.records.get(&keys.record).filter(|r| r.expires > now) {
            if record.fingerprint != fingerprint {
                return Some(Claimed::Mismatch);
            }
            return Some(match &record.phase {
                Phase::InProgress { .. } => Claimed::Processing {
                    lease_left: record.expires - now,
                },
                Phase::Done(result) => Claimed::Completed(result.clone()),
            });
        }
        if state.records.len() >= MAX_RECORDS {
            state.sweep(now);
            if state.records.len() >= MAX_RECORDS {
                return None;
            }
        }
        let fence = match state.fences.get(&keys.fence) {
            Some((n, until)) if *until > now => *n,
            _ => 0,
        }
        .max(state.forgotten)
            + 1;
        state
            .fences
            .insert(keys.fence.clone(), (fence, now + fence_ttl));
        state.records.insert(
            keys.record.clone(),
            Record {
                fingerprint: fingerprint.to_owned(),
                expires: now + lease,
                phase: Phase::InProgress {
                    owner: token.to_owned(),
                },
            },
        );
        Some(Claimed::Claimed(fence))
    }

    pub(crate) fn renew(&self, keys: &RecordKeys, owner: &str, lease: Duration) -> bool {
        match self.state().owned(keys, owner) {
            Some(record) => {
                record.expires = Instant::now() + lease;
                true
            }
            None => false,
        }
    }

    pub(crate) fn complete(
        &self,
        keys: &RecordKeys,
        owner: &str,
        result: &Completion,
        retention: Duration,
    ) -> bool {
        let mut state = self.state();
        let Some(record) = state.owned(keys, owner) else {
            return false;
        };
        record.phase = Phase::Done(result.clone());
        record.expires = Instant::now() + retention;
        true
    }

    pub(crate) fn release(&self, keys: &RecordKeys, owner: &str) -> bool {
        let mut state = self.state();
        if state.owned(keys, owner).is_none() {
            return false;
        }
        state.records.remove(&keys.record);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim<'a>(keys: &'a RecordKeys, token: &'a str, fingerprint: &'a str) -> Claim<'a> {
        Claim {
            keys,
            token,
            fingerprint,
            lease: Duration::from_secs(5),
            fence_ttl: Duration::from_secs(60),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_goes_from_claimed_to_completed_and_tokens_keep_rising() {
        let records = MemoryRecords::default();
        let keys = RecordKeys {
            user: "k".into(),
            record: "idem:{k}".into(),
            fence: "idem:{k}:fence".into(),
        };
        let Some(Claimed::Claimed(first)) = records.claim(&claim(&keys, "a", "f")) else {
            panic!("free record");
        };
        assert!(matches!(
            records.claim(&claim(&keys, "b", "f")),
            Some(Claimed::Processing { .. })
        ));
        assert_eq!(
            records.claim(&claim(&keys, "b", "g")),
            Some(Claimed::Mismatch)
        );
        assert!(!records.release(&keys, "b"), "not b's");
        assert!(records.release(&keys, "a"));
        let Some(Claimed::Claimed(second)) = records.claim(&claim(&keys, "c", "f")) else {
            panic!("released");
        };
        assert!(second > first);
        let done = Completion {
            replayable: true,
            status: 201,
            headers: Vec::new(),
            body: b"{}".to_vec(),
        };
        assert!(records.complete(&keys, "c", &done, Duration::from_secs(60)));
        assert_eq!(
            records.claim(&claim(&keys, "d", "f")),
            Some(Claimed::Completed(done))
        );
    }
}
