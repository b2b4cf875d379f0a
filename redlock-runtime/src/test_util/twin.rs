//! The in-memory twins' steps over a discrete clock, for the models of
//! `redlock-model`: what a Redis node does, as the memory store does it.
//!
//! A model counts time in ticks (`u8`, from 0); each tick here is
//! [`TICK`] after one fixed base [`Instant`], so tick `t` is the instant
//! `base + t × TICK`, and a node's clock (the one its fencing tokens'
//! floor reads, what `TIME` gives a script) reads `t × TICK` in
//! microseconds: [`CLOCK_PER_TICK`]. Every step takes the tick it runs at,
//! as a script reads the clock once; a step reads no clock of its own, so
//! a model's states are the same whenever it is checked.
//!
//! A node is the twin's table for one key (a lock's key and its fencing
//! counter; a record's key and its counter). It is `Clone` (a replica's
//! copy, a snapshot), `Eq` and `Hash` over what it holds (the model
//! checker keeps its states in a set): the key's value and expiry, and
//! the counter's value. When a counter may be forgotten is left out: it is
//! kept for [`RETENTION`], longer than any model's clock runs, so two
//! nodes that differ only there behave alike within a model. Restarting a node empty keeps its
//! clock running ([`LockNode::restarted_empty`]); a node built
//! [`without_clock_floor`](LockNode::without_clock_floor) has a clock that
//! reads zero throughout, the broken variant of the fencing rule.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::primitive::lock::LockKeys;
use crate::primitive::lock::memory::LockTable;
use crate::primitive::record::memory::{RecordTable, Stored};
use crate::primitive::record::{Claim as ClaimArgs, Claimed, Completion, RecordKeys};

/// How long one tick lasts.
pub const TICK: Duration = Duration::from_millis(1);

/// How far a node's clock moves in one tick, in microseconds: the most
/// fencing tokens one counter can issue in a tick and still have the
/// clock floor above them all a tick later.
pub const CLOCK_PER_TICK: u64 = 1_000;

/// How long a counter is kept after it issued a token: longer than any
/// model's clock, so a counter is lost only in a restart or a failover.
pub const RETENTION: Duration = Duration::from_secs(3_600);

/// The instant of tick 0 (one per process).
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// The instant of tick `t`.
fn at(t: u8) -> Instant {
    base() + TICK * u32::from(t)
}

/// The tick an instant falls in (rounded up: a lease ending within tick `t`
/// has ended at `t`).
fn tick_of(instant: Instant) -> u64 {
    let nanos = instant.saturating_duration_since(base()).as_nanos();
    let tick = nanos.div_ceil(TICK.as_nanos());
    u64::try_from(tick).unwrap_or(u64::MAX)
}

/// The zero of a node's fencing clock: tick 0, or (no floor) a zero so far
/// ahead that the clock reads 0 throughout.
fn clock_zero(floor: bool) -> Instant {
    if floor {
        base()
    } else {
        base() + Duration::from_secs(365 * 24 * 3_600)
    }
}

/// The digest of what a node holds, taken after each of its steps, so a
/// model state's hash reads a number instead of looking the keys up (the
/// model checker hashes every state it reaches). `DefaultHasher::new` has
/// fixed keys: the same in every run.
fn digest(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// What a lock node holds: the key's token and expiry, the counter's
/// value, and whether its clock has the floor.
type LockCanonical<'a> = (Option<(&'a str, Instant)>, Option<u64>, bool);

/// One node's keys for one lock, as the memory twin holds them
/// (`LockTable`'s steps: `acquire.lua`, `extend.lua`, `release.lua`).
#[derive(Debug, Clone)]
pub struct LockNode {
    /// Shared by a node's copies until one of them takes a step (a clone
    /// is the model checker's hot path: most steps leave most nodes as
    /// they were).
    table: Arc<LockTable>,
    keys: Arc<LockKeys>,
    floor: bool,
    /// The digest of [`canonical`](Self::canonical).
    digest: u64,
}

impl LockNode {
    /// An empty node, its fencing clock running.
    pub fn new() -> Self {
        Self::with_floor(true)
    }

    /// An empty node whose clock reads zero throughout: tokens are the
    /// counter + 1 only (the broken variant of `shared/fence.lua`).
    pub fn without_clock_floor() -> Self {
        Self::with_floor(false)
    }

    fn with_floor(floor: bool) -> Self {
        let mut node = Self {
            table: Arc::new(LockTable::new(clock_zero(floor))),
            keys: Arc::new(LockKeys::new("model:", "lock".to_owned())),
            floor,
            digest: 0,
        };
        node.digest = digest(&node.canonical());
        node
    }

    /// Runs one of the twin's steps on this node's copy of the table.
    fn step<R>(&mut self, step: impl FnOnce(&mut LockTable, &LockKeys) -> R) -> R {
        let reply = step(Arc::make_mut(&mut self.table), &self.keys);
        self.digest = digest(&self.canonical());
        reply
    }

    /// The node after a restart without persistence: empty, its clock
    /// where it was.
    #[must_use]
    pub fn restarted_empty(&self) -> Self {
        Self::with_floor(self.floor)
    }

    /// A fenced acquire by `token` at tick `now` for `ttl` ticks: its
    /// fencing token, or `None` when another holds the lock.
    pub fn acquire(&mut self, token: &str, ttl: u8, now: u8) -> Option<u64> {
        let ttl = TICK * u32::from(ttl);
        let reply = self
            .step(|table, keys| table.acquire(keys, token, ttl, (at(now), None), RETENTION, true));
        match reply {
            crate::primitive::lease::AcquireReply::Acquired { fence, .. } => Some(fence),
            _ => None,
        }
    }

    /// Renews the lease of `token` for `ttl` ticks from `now`: whether it
    /// held the lock.
    pub fn renew(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        self.step(|table, keys| table.renew(&keys.lock, token, ttl, at(now)))
    }

    /// The compare-and-delete of `token` at `now`: whether its lease still
    /// lasted. The key is deleted whenever it holds `token`.
    pub fn release(&mut self, token: &str, now: u8) -> bool {
        self.step(|table, keys| table.release(keys, token, at(now)))
    }

    /// A Redlock node's release (`release.lua` with a token to raise): the
    /// compare-and-delete of `token`, then the counter raised to `fence`
    /// if it is below.
    pub fn release_raising(&mut self, token: &str, fence: u64, now: u8) -> bool {
        let released = self.release(token, now);
        self.step(|table, keys| table.raise(&keys.fence, fence, at(now), RETENTION));
        released
    }

    /// The holder at `now`, while its lease lasts.
    pub fn holder(&self, now: u8) -> Option<&str> {
        self.table
            .holder(&self.keys.lock, at(now))
            .map(|(token, _)| token)
    }

    /// What the key holds, expired or not: the token and the tick its
    /// lease ends.
    pub fn stored(&self) -> Option<(&str, u64)> {
        (self.table.held.get(&self.keys.lock)).map(|h| (h.token.as_str(), tick_of(h.expires)))
    }

    /// Drops what expired by `now`, as a node does loading a snapshot.
    pub fn load(&mut self, now: u8) {
        self.step(|table, _| table.sweep(at(now)));
    }

    /// What the node holds (its steps touch its one key and counter
    /// only; fair mode's lines are not part of a lock node).
    fn canonical(&self) -> LockCanonical<'_> {
        let held = (self.table.held.get(&self.keys.lock)).map(|h| (h.token.as_str(), h.expires));
        let counter = self.table.fences.get(&self.keys.fence).map(|f| f.value);
        (held, counter, self.floor)
    }
}

impl Default for LockNode {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LockNode {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
            && (Arc::ptr_eq(&self.table, &other.table) && self.floor == other.floor
                || self.canonical() == other.canonical())
    }
}

impl Eq for LockNode {}

impl Hash for LockNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

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
            table: Arc::new(RecordTable::new(clock_zero(true))),
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

impl Default for RecordNode {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for RecordNode {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
            && (Arc::ptr_eq(&self.table, &other.table) || self.canonical() == other.canonical())
    }
}

impl Eq for RecordNode {}

impl Hash for RecordNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_node_issues_tokens_above_those_before_and_a_floorless_one_repeats() {
        let mut node = LockNode::new();
        let first = node.acquire("a", 3, 1).expect("free");
        let mut restarted = node.restarted_empty();
        let second = restarted.acquire("b", 3, 2).expect("empty");
        assert!(second > first, "{second} after {first}");
        let mut floorless = LockNode::without_clock_floor();
        let first = floorless.acquire("a", 3, 1).expect("free");
        let again = floorless.restarted_empty().acquire("b", 3, 2);
        assert_eq!(again, Some(first), "no floor: the counter starts over");
    }

    #[test]
    fn nodes_holding_the_same_compare_equal_and_expiry_is_in_ticks() {
        let mut a = LockNode::new();
        let mut b = LockNode::new();
        assert_eq!(a.acquire("t", 3, 1), b.acquire("t", 3, 1));
        assert_eq!(a, b);
        assert_eq!(a.stored(), Some(("t", 4)));
        assert_eq!(a.holder(3), Some("t"));
        assert_eq!(a.holder(4), None, "ended at tick 4");
        assert!(!a.release("u", 2), "not u's");
        assert!(a.release("t", 2));
        assert_ne!(a, b);
        let raised = b.acquire("t", 3, 1).unwrap_or(0) + 10 * CLOCK_PER_TICK;
        assert!(b.release_raising("t", raised, 2));
        assert_eq!(b.acquire("u", 3, 2), Some(raised + 1), "above the raise");
    }

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
