//! A lock's node: `LockTable`'s steps (`acquire.lua`, `extend.lua`,
//! `release.lua`, `shared/fence.lua`) on one key and its fencing counter.

use std::sync::Arc;

use tokio::time::Instant;

use super::{RETENTION, TICK, at, clock_zero, digest, no_clock_floor, tick_of};
use crate::primitive::lock::LockKeys;
use crate::primitive::lock::memory::LockTable;

/// What a lock node holds: the key's token and expiry, the counter's
/// value, and its clock's zero.
type LockCanonical<'a> = (Option<(&'a str, Instant)>, Option<u64>, Instant);

/// One node's keys for one lock, as the memory twin holds them
/// (`LockTable`'s steps: `acquire.lua`, `extend.lua`, `release.lua`).
#[derive(Debug, Clone)]
pub struct LockNode {
    /// Shared by a node's copies until one of them takes a step (a clone
    /// is the model checker's hot path: most steps leave most nodes as
    /// they were).
    table: Arc<LockTable>,
    keys: Arc<LockKeys>,
    /// The zero of its fencing clock, which a restart keeps.
    clock_zero: Instant,
    /// The digest of [`canonical`](Self::canonical).
    digest: u64,
}

impl LockNode {
    /// An empty node, its fencing clock running.
    pub fn new() -> Self {
        Self::with_clock_zero(clock_zero(0))
    }

    /// An empty node whose clock reads `ticks` ahead of the model's: the
    /// floor of its fencing tokens at tick `t` is
    /// `(t + ticks) × CLOCK_PER_TICK`.
    pub fn with_clock_ahead(ticks: u8) -> Self {
        Self::with_clock_zero(clock_zero(ticks))
    }

    /// An empty node whose clock reads zero throughout: tokens are the
    /// counter + 1 only (the broken variant of `shared/fence.lua`).
    pub fn without_clock_floor() -> Self {
        Self::with_clock_zero(no_clock_floor())
    }

    fn with_clock_zero(clock_zero: Instant) -> Self {
        let mut node = Self {
            table: Arc::new(LockTable::new(clock_zero)),
            keys: Arc::new(LockKeys::new("model:", "lock".to_owned())),
            clock_zero,
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
        Self::with_clock_zero(self.clock_zero)
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
        (held, counter, self.clock_zero)
    }
}

node_identity!(LockNode);

#[cfg(test)]
mod tests {
    use super::super::CLOCK_PER_TICK;
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
        let mut ahead = LockNode::with_clock_ahead(2);
        let early = ahead.acquire("a", 3, 1).expect("free");
        assert_eq!(early, 3 * CLOCK_PER_TICK, "tick 1, two ahead");
        assert!(ahead.restarted_empty().acquire("b", 3, 2) > Some(early));
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
}
