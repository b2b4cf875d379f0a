//! A lock's node: `LockTable`'s steps (`acquire.lua`, `extend.lua`,
//! `release.lua`, `shared/fence.lua`) on one key and its fencing counter.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use super::{RETENTION, TICK, at, clock_zero, no_clock_floor, tick_of};
use crate::primitive::lease::AcquireReply;
use crate::primitive::lock::LockKeys;
use crate::primitive::lock::memory::{Fence, Held, LockTable};

/// One node's keys for one lock, as the memory twin holds them
/// (`LockTable`'s steps: `acquire.lua`, `extend.lua`, `release.lua`).
///
/// The node keeps what its one key and its counter hold as plain data,
/// cheap to copy and to hash (the model checker copies and hashes every
/// state it reaches, and most steps leave most nodes as they were); each
/// step loads that data into a fresh `LockTable`, runs the table's own
/// step on it, and reads the key and the counter back. Nothing else of a
/// table bears on one lock's steps (fair mode's lines are not part of a
/// lock node), so the step is the memory store's, on the same data.
///
/// A counter's retention is not kept: it is [`RETENTION`], longer than
/// any model's clock runs, so within a model a counter is lost only in a
/// restart; a loaded counter is kept past every tick.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockNode {
    /// The key's holder, expired or not: its token and when its lease ends.
    held: Option<(Arc<str>, Instant)>,
    /// The fencing counter's value, if any.
    counter: Option<u64>,
    /// The zero of its fencing clock, which a restart keeps.
    clock_zero: Instant,
}

thread_local! {
    /// The table each step runs on, one per thread, kept between steps
    /// (loaded with a node's data before each): building a table per step
    /// made the model checker's time mostly allocation.
    static SCRATCH: RefCell<(LockTable, LockKeys)> = RefCell::new((
        LockTable::new(clock_zero(0)),
        LockKeys::new("model:", "lock".to_owned()),
    ));
}

impl LockNode {
    /// An empty node, its fencing clock running.
    #[inline]
    pub fn new() -> Self {
        Self::with_clock_zero(clock_zero(0))
    }

    /// An empty node whose clock reads `ticks` ahead of the model's: the
    /// floor of its fencing tokens at tick `t` is
    /// `(t + ticks) × CLOCK_PER_TICK`.
    #[inline]
    pub fn with_clock_ahead(ticks: u8) -> Self {
        Self::with_clock_zero(clock_zero(ticks))
    }

    /// An empty node whose clock reads zero throughout: tokens are the
    /// counter + 1 only (the broken variant of `shared/fence.lua`).
    #[inline]
    pub fn without_clock_floor() -> Self {
        Self::with_clock_zero(no_clock_floor())
    }

    fn with_clock_zero(clock_zero: Instant) -> Self {
        Self {
            held: None,
            counter: None,
            clock_zero,
        }
    }

    /// Runs one of the twin's steps on a table holding what this node
    /// holds, and keeps what the table holds after it.
    #[inline]
    fn step<R>(&mut self, step: impl FnOnce(&mut LockTable, &LockKeys) -> R) -> R {
        SCRATCH.with_borrow_mut(|(table, keys)| {
            self.load_into(table, keys);
            let reply = step(table, keys);
            self.held = table.held.get(&keys.lock).map(|h| {
                let token = match &self.held {
                    Some((kept, _)) if **kept == *h.token => Arc::clone(kept),
                    _ => Arc::from(h.token.as_str()),
                };
                (token, h.expires)
            });
            self.counter = table.fences.get(&keys.fence).map(|f| f.value);
            reply
        })
    }

    /// Makes `table` hold what this node holds, and nothing else: its key,
    /// its counter (kept past every tick) and its clock's zero.
    #[inline]
    fn load_into(&self, table: &mut LockTable, keys: &LockKeys) {
        table.lines.clear();
        table.set_clock_zero(self.clock_zero);
        match (&self.held, table.held.get_mut(&keys.lock)) {
            (Some((token, expires)), Some(held)) => {
                held.token.clear();
                held.token.push_str(token);
                held.expires = *expires;
            }
            (Some((token, expires)), None) => {
                let held = Held {
                    token: token.to_string(),
                    expires: *expires,
                    granted: SystemTime::UNIX_EPOCH,
                };
                table.held.insert(keys.lock.clone(), held);
            }
            (None, _) => {
                table.held.remove(&keys.lock);
            }
        }
        let keep_until = at(u8::MAX) + RETENTION;
        match (self.counter, table.fences.get_mut(&keys.fence)) {
            (Some(value), Some(fence)) => *fence = Fence { value, keep_until },
            (Some(value), None) => {
                (table.fences).insert(keys.fence.clone(), Fence { value, keep_until });
            }
            (None, _) => {
                table.fences.remove(&keys.fence);
            }
        }
    }

    /// The node after a restart without persistence: empty, its clock
    /// where it was.
    #[must_use]
    #[inline]
    pub fn restarted_empty(&self) -> Self {
        Self::with_clock_zero(self.clock_zero)
    }

    /// A fenced acquire by `token` at tick `now` for `ttl` ticks: its
    /// fencing token, or `None` when another holds the lock.
    #[inline]
    pub fn acquire(&mut self, token: &str, ttl: u8, now: u8) -> Option<u64> {
        let ttl = TICK * u32::from(ttl);
        let reply = self
            .step(|table, keys| table.acquire(keys, token, ttl, (at(now), None), RETENTION, true));
        match reply {
            AcquireReply::Acquired { fence, .. } => Some(fence),
            _ => None,
        }
    }

    /// A plain acquire by `token` at tick `now` for `ttl` ticks, issuing
    /// no token (`SET NX PX`, what a Redlock node whose ACL refuses the
    /// acquire script grants): whether it took the lock. (A key already
    /// holding `token` counts as taken, as the conditional attempt's `SET
    /// NX GET` finds its own token; a model asks a node once per token.)
    #[inline]
    pub fn acquire_plain(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        let reply = self
            .step(|table, keys| table.acquire(keys, token, ttl, (at(now), None), RETENTION, false));
        matches!(reply, AcquireReply::Acquired { .. })
    }

    /// The watchdog's renewal of `token`'s lease for `ttl` ticks from
    /// `now` (`extend.lua` with its last argument 1): whether it held the
    /// lock. A longer lease is kept.
    #[inline]
    pub fn renew(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        self.step(|table, keys| table.renew(&keys.lock, token, (ttl, true), at(now)))
    }

    /// A manual extend of `token`'s lease to `ttl` ticks from `now`
    /// (`extend.lua` with its last argument 0; the same rule as the
    /// conditional `SET lock token IFEQ token PX ttl`): whether it held
    /// the lock. The lease is set, shorter or not.
    #[inline]
    pub fn extend(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        self.step(|table, keys| table.renew(&keys.lock, token, (ttl, false), at(now)))
    }

    /// The compare-and-delete of `token` at `now`: whether its lease still
    /// lasted. The key is deleted whenever it holds `token`.
    #[inline]
    pub fn release(&mut self, token: &str, now: u8) -> bool {
        self.step(|table, keys| table.release(keys, token, at(now)))
    }

    /// A Redlock node's release (`release.lua` with a token to raise): the
    /// compare-and-delete of `token`, then the counter raised to `fence`
    /// if it is below.
    #[inline]
    pub fn release_raising(&mut self, token: &str, fence: u64, now: u8) -> bool {
        self.step(|table, keys| {
            let released = table.release(keys, token, at(now));
            table.raise(&keys.fence, fence, at(now), RETENTION);
            released
        })
    }

    /// The holder at `now`, while its lease lasts (`LockTable::holder`'s
    /// rule: a lease ending at `now` has ended).
    #[inline]
    pub fn holder(&self, now: u8) -> Option<&str> {
        (self.held.as_ref())
            .filter(|(_, expires)| *expires > at(now))
            .map(|(token, _)| &**token)
    }

    /// What the key holds, expired or not: the token and the tick its
    /// lease ends.
    #[inline]
    pub fn stored(&self) -> Option<(&str, u64)> {
        (self.held.as_ref()).map(|(token, expires)| (&**token, tick_of(*expires)))
    }

    /// Drops what expired by `now`, as a node does loading a snapshot.
    #[inline]
    pub fn load(&mut self, now: u8) {
        self.step(|table, _| table.sweep(at(now)));
    }
}

impl Default for LockNode {
    fn default() -> Self {
        Self::new()
    }
}
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
        assert!(a.acquire("t", 3, 2).is_some());
        assert!(a.extend("t", 9, 2), "a manual extend lengthens");
        assert!(a.renew("t", 3, 3), "the watchdog's renewal keeps it");
        assert_eq!(a.stored(), Some(("t", 11)));
        assert!(a.extend("t", 2, 3), "a manual extend shortens");
        assert_eq!(a.stored(), Some(("t", 5)));
        let raised = b.acquire("t", 3, 1).unwrap_or(0) + 10 * CLOCK_PER_TICK;
        assert!(b.release_raising("t", raised, 2));
        assert_eq!(b.acquire("u", 3, 2), Some(raised + 1), "above the raise");
    }
}
