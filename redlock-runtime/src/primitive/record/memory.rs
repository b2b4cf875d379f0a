//! Idempotency records' twin in process memory, for an in-memory (or
//! Redlock) client: their table and its steps, with the same states and
//! transitions as the record scripts on Redis (`claim.lua`, `renew.lua`,
//! `complete.lua`, `release.lua`). Each step takes the time it runs at
//! from its caller (the memory store), as a script reads Redis's clock.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::{Claim, Claimed, Completion, RecordKeys};
use crate::primitive::lock::memory::next_token;

/// The most records kept at once: past it (after a sweep), new claims fail
/// rather than grow the process without bound.
pub(crate) const MAX_RECORDS: usize = 100_000;

/// The records and their fencing counters.
#[derive(Debug, Clone)]
pub(crate) struct RecordTable {
    records: HashMap<String, Record>,
    fences: HashMap<String, (u64, Instant)>,
    /// The zero of the clock a fencing token's floor reads: a takeover
    /// never repeats a token, even after its counter was forgotten
    /// ([`next_token`], as on Redis).
    clock_zero: Instant,
}

impl RecordTable {
    /// An empty table whose fencing clock starts at `clock_zero`.
    pub(crate) fn new(clock_zero: Instant) -> Self {
        Self {
            records: HashMap::new(),
            fences: HashMap::new(),
            clock_zero,
        }
    }

    /// Forgets the records and counters that ended.
    pub(crate) fn sweep(&mut self, now: Instant) {
        self.records.retain(|_, r| r.expires > now);
        self.fences.retain(|_, (_, until)| *until > now);
    }

    /// The record, if `owner` holds it and its lease is not over.
    fn owned(&mut self, keys: &RecordKeys, owner: &str, now: Instant) -> Option<&mut Record> {
        self.records.get_mut(&keys.record).filter(|r| {
            r.expires > now && matches!(&r.phase, Phase::InProgress { owner: o } if o == owner)
        })
    }
}

/// What a record's key holds (for the models' view of the twin).
#[cfg(feature = "test-util")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stored<'a> {
    /// In progress, by this owner.
    InProgress(&'a str),
    /// Completed.
    Done,
}

#[cfg(feature = "test-util")]
impl RecordTable {
    /// What the record at `keys` holds, expired or not, and its expiry.
    pub(crate) fn stored(&self, keys: &RecordKeys) -> Option<(Instant, Stored<'_>)> {
        let record = self.records.get(&keys.record)?;
        let stored = match &record.phase {
            Phase::InProgress { owner } => Stored::InProgress(owner),
            Phase::Done(_) => Stored::Done,
        };
        Some((record.expires, stored))
    }

    /// The fencing counter at `keys` and when it may be forgotten.
    pub(crate) fn counter(&self, keys: &RecordKeys) -> Option<(u64, Instant)> {
        self.fences.get(&keys.fence).copied()
    }
}

#[derive(Debug, Clone)]
struct Record {
    fingerprint: String,
    expires: Instant,
    phase: Phase,
}

#[derive(Debug, Clone)]
enum Phase {
    InProgress { owner: String },
    Done(Completion),
}

impl RecordTable {
    /// absent -> in progress, or what is there; `None` when full.
    pub(crate) fn claim(&mut self, claim: &Claim<'_>, now: Instant) -> Option<Claimed<u64>> {
        let Claim {
            keys,
            token,
            fingerprint,
            lease,
            fence_ttl,
        } = *claim;
        let state = self;
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
        let counter = match state.fences.get(&keys.fence) {
            Some((n, until)) if *until > now => *n,
            _ => 0,
        };
        let fence = next_token(counter, now, state.clock_zero);
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

    /// Renews the lease of a record `owner` holds.
    pub(crate) fn renew(
        &mut self,
        keys: &RecordKeys,
        owner: &str,
        lease: Duration,
        now: Instant,
    ) -> bool {
        match self.owned(keys, owner, now) {
            Some(record) => {
                record.expires = now + lease;
                true
            }
            None => false,
        }
    }

    /// Completes a record `owner` holds with `result`, kept for
    /// `retention`.
    pub(crate) fn complete(
        &mut self,
        keys: &RecordKeys,
        owner: &str,
        (result, retention): (&Completion, Duration),
        now: Instant,
    ) -> bool {
        let Some(record) = self.owned(keys, owner, now) else {
            return false;
        };
        record.phase = Phase::Done(result.clone());
        record.expires = now + retention;
        true
    }

    /// Deletes a record `owner` holds, so that a retry runs again.
    pub(crate) fn release(&mut self, keys: &RecordKeys, owner: &str, now: Instant) -> bool {
        if self.owned(keys, owner, now).is_none() {
            return false;
        }
        self.records.remove(&keys.record);
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
        let mut records = RecordTable::new(Instant::now());
        let now = Instant::now();
        let keys = RecordKeys {
            user: "k".into(),
            record: "idem:{k}".into(),
            fence: "idem:{k}:fence".into(),
        };
        let Some(Claimed::Claimed(first)) = records.claim(&claim(&keys, "a", "f"), now) else {
            panic!("free record");
        };
        assert!(matches!(
            records.claim(&claim(&keys, "b", "f"), now),
            Some(Claimed::Processing { .. })
        ));
        assert_eq!(
            records.claim(&claim(&keys, "b", "g"), now),
            Some(Claimed::Mismatch)
        );
        assert!(!records.release(&keys, "b", now), "not b's");
        assert!(records.release(&keys, "a", now));
        let Some(Claimed::Claimed(second)) = records.claim(&claim(&keys, "c", "f"), now) else {
            panic!("released");
        };
        assert!(second > first);
        let done = Completion {
            replayable: true,
            status: 201,
            headers: Vec::new(),
            body: b"{}".to_vec(),
        };
        assert!(records.complete(&keys, "c", (&done, Duration::from_secs(60)), now));
        assert_eq!(
            records.claim(&claim(&keys, "d", "f"), now),
            Some(Claimed::Completed(done))
        );
    }
}
