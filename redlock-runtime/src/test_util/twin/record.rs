//! An idempotency record's node: `RecordTable`'s steps (`claim.lua`,
//! `renew.lua`, `complete.lua`, `release.lua`) on one record and its
//! fencing counter.

use std::sync::Arc;

use tokio::time::Instant;

use super::{RETENTION, TICK, at, clock_zero, digest, tick_of};
use crate::primitive::record::memory::{RecordTable, Stored};
use crate::primitive::record::{Claim as ClaimArgs, Claimed, Completion, RecordKeys};

/// What a claim of a record found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordClaim {
    /// Claimed, with this fencing token.
    Claimed(u64),
    /// Another worker's lease on it lasts.
    Processing,
    /// Completed: a duplicate is replayed.
    Completed,
    /// Claimed before with another fingerprint.
    Mismatch,
}

/// What a record's key holds, expired or not.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordState {
    /// Nothing.
    Absent,
    /// In progress: its owner, and the tick its lease ends.
    InProgress {
        /// The owner's token.
        owner: String,
        /// The tick the lease ends.
        ends: u64,
    },
    /// Completed: the tick its retention ends.
    Completed {
        /// The tick the retention ends.
        ends: u64,
    },
}

/// One node's keys for one idempotency record, as the memory twin holds
/// them (`RecordTable`'s steps: `claim.lua`, `renew.lua`, `complete.lua`,
/// `release.lua`).
#[derive(Debug, Clone)]
pub struct RecordNode {
    /// Shared by a node's copies until one of them takes a step.
    table: Arc<RecordTable>,
    /// Shared by a node's copies.
    keys: Arc<RecordKeys>,
    /// The digest of [`canonical`](Self::canonical).
    digest: u64,
}

impl RecordNode {
    /// An empty node.
    pub fn new() -> Self {
        let mut node = Self {
            table: Arc::new(RecordTable::new(clock_zero(0))),
            keys: Arc::new(RecordKeys {
                user: "record".to_owned(),
                record: "model:{record}".to_owned(),
                fence: "model:{record}:fence".to_owned(),
            }),
            digest: 0,
        };
        node.digest = digest(&node.canonical());
        node
    }

    /// Runs one of the twin's steps on this node's copy of the table.
    fn step<R>(&mut self, step: impl FnOnce(&mut RecordTable, &RecordKeys) -> R) -> R {
        let reply = step(Arc::make_mut(&mut self.table), &self.keys);
        self.digest = digest(&self.canonical());
        reply
    }

    /// A claim by `owner` at `now`, with a lease of `lease` ticks.
    pub fn claim(&mut self, owner: &str, lease: u8, now: u8) -> RecordClaim {
        let claimed = self.step(|table, keys| {
            let claim = ClaimArgs {
                keys,
                token: owner,
                fingerprint: "payload",
                lease: TICK * u32::from(lease),
                fence_ttl: RETENTION,
            };
            table.claim(&claim, at(now))
        });
        match claimed {
            Some(Claimed::Claimed(fence)) => RecordClaim::Claimed(fence),
            Some(Claimed::Completed(_)) => RecordClaim::Completed,
            Some(Claimed::Mismatch) => RecordClaim::Mismatch,
            Some(Claimed::Processing { .. }) | None => RecordClaim::Processing,
        }
    }

    /// Renews `owner`'s lease for `lease` ticks from `now`: whether it
    /// held the record.
    pub fn renew(&mut self, owner: &str, lease: u8, now: u8) -> bool {
        let lease = TICK * u32::from(lease);
        self.step(|table, keys| table.renew(keys, owner, lease, at(now)))
    }

    /// Completes `owner`'s record at `now`, kept for `retention` ticks:
    /// whether it held it.
    pub fn complete(&mut self, owner: &str, retention: u8, now: u8) -> bool {
        let done = Completion::new(200, Vec::new(), Vec::new());
        let kept = TICK * u32::from(retention);
        self.step(|table, keys| table.complete(keys, owner, (&done, kept), at(now)))
    }

    /// Deletes `owner`'s record at `now` (a failed run): whether it held
    /// it.
    pub fn release(&mut self, owner: &str, now: u8) -> bool {
        self.step(|table, keys| table.release(keys, owner, at(now)))
    }

    /// What the record's key holds, expired or not.
    pub fn stored(&self) -> RecordState {
        match self.table.stored(&self.keys) {
            None => RecordState::Absent,
            Some((expires, Stored::InProgress(owner))) => RecordState::InProgress {
                owner: owner.to_owned(),
                ends: tick_of(expires),
            },
            Some((expires, Stored::Done)) => RecordState::Completed {
                ends: tick_of(expires),
            },
        }
    }

    /// What the node holds: the record's state and expiry, and the
    /// counter's value.
    fn canonical(&self) -> (Option<(Instant, Stored<'_>)>, Option<u64>) {
        let counter = self.table.counter(&self.keys).map(|(value, _)| value);
        (self.table.stored(&self.keys), counter)
    }
}

node_identity!(RecordNode);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_node_claims_completes_and_a_takeover_gets_a_larger_token() {
        let mut node = RecordNode::new();
        let RecordClaim::Claimed(first) = node.claim("w1", 3, 1) else {
            panic!("absent");
        };
        assert_eq!(node.claim("w2", 3, 2), RecordClaim::Processing);
        let RecordClaim::Claimed(second) = node.claim("w2", 3, 4) else {
            panic!("lease ended at 4: a takeover");
        };
        assert!(second > first);
        assert!(!node.complete("w1", 50, 4), "no longer w1's");
        assert!(node.complete("w2", 50, 5));
        assert_eq!(node.stored(), RecordState::Completed { ends: 55 });
        assert_eq!(node.claim("w3", 3, 6), RecordClaim::Completed);
    }
}
