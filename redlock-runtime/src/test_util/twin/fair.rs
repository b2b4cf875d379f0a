//! A fair lock's node: fair mode's steps (`fair/acquire.lua`,
//! `fair/release.lua`, `fair/leave.lua`, their hand-over
//! `shared/hand_over.lua`) on one lock's key, its line and its counter.

use std::sync::Arc;

use tokio::time::Instant;

use super::{RETENTION, TICK, at, clock_zero, digest, tick_of};
use crate::primitive::fair::memory::{self as fair, Next};
use crate::primitive::lease::AcquireReply;
use crate::primitive::lock::LockKeys;
use crate::primitive::lock::memory::LockTable;

/// What a fair node holds: the lock's token and expiry, and its line (the
/// waiters in order, each with its presence deadline).
type FairCanonical<'a> = (Option<(&'a str, Instant)>, Vec<(&'a str, Instant)>);

/// Whom a fair release or give-back wakes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FairWake {
    /// The lock was handed to this waiter (a grant).
    Granted(String),
    /// The lock is free and this waiter is first in line.
    Named(String),
    /// The lock was deleted: no live waiter.
    Longest,
}

impl From<Next> for FairWake {
    fn from(next: Next) -> Self {
        match next {
            Next::Granted { token, .. } => Self::Granted(token),
            Next::Named(token) => Self::Named(token),
            Next::Longest => Self::Longest,
        }
    }
}

/// One node's keys for one fair lock, as the memory twin holds them
/// (`fair::memory`'s steps over a `LockTable`).
///
/// The fencing counter is left out of its equality and hash: no step's
/// answer that a fair model reads depends on it (a grant's token is
/// issued and not read), so two nodes that differ only there behave
/// alike in the model.
#[derive(Debug, Clone)]
pub struct FairNode {
    /// Shared by a node's copies until one of them takes a step.
    table: Arc<LockTable>,
    /// Shared by a node's copies.
    keys: Arc<LockKeys>,
    /// The digest of [`canonical`](Self::canonical).
    digest: u64,
}

impl FairNode {
    /// An empty node.
    pub fn new() -> Self {
        let mut node = Self {
            table: Arc::new(LockTable::new(clock_zero(0))),
            keys: Arc::new(LockKeys::new("model:", "fair".to_owned())),
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

    /// A fair acquire by `token` at `now` (`fair/acquire.lua`): the lock
    /// for `ttl` ticks when it is free and `token` is first in line (or no
    /// one waits), or already `token`'s (a grant it had not seen); else
    /// `token` joins the line, or keeps its place, for `presence` ticks.
    /// Whether it holds the lock.
    pub fn acquire(&mut self, token: &str, ttl: u8, presence: u8, now: u8) -> bool {
        let times = (TICK * u32::from(ttl), TICK * u32::from(presence));
        let reply = self.step(|table, keys| {
            fair::acquire(table, keys, token, times, (at(now), None), RETENTION)
        });
        matches!(reply, AcquireReply::Acquired { .. })
    }

    /// The plain acquire (`lock/acquire.lua`) on the fair lock's key, which
    /// ignores the line: the broken variant of fair mode.
    pub fn acquire_plain(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        let reply = self
            .step(|table, keys| table.acquire(keys, token, ttl, (at(now), None), RETENTION, true));
        matches!(reply, AcquireReply::Acquired { .. })
    }

    /// The fair release of `token` at `now` (`fair/release.lua`): whom it
    /// woke, or `None` when `token` did not hold the lock.
    pub fn release(&mut self, token: &str, now: u8) -> Option<FairWake> {
        self.step(|table, keys| fair::release(table, keys, token, at(now), RETENTION))
            .map(FairWake::from)
    }

    /// `token` gives up at `now` (`fair/leave.lua`): whether it held the
    /// lock (which then went on), and whom it woke.
    pub fn leave(&mut self, token: &str, now: u8) -> (bool, Option<FairWake>) {
        let (held, next) =
            self.step(|table, keys| fair::leave(table, keys, token, at(now), RETENTION));
        (held, next.map(FairWake::from))
    }

    /// The holder at `now`, while its lease lasts.
    pub fn holder(&self, now: u8) -> Option<&str> {
        self.table
            .holder(&self.keys.lock, at(now))
            .map(|(token, _)| token)
    }

    /// What the lock's key holds, expired or not: the token and the tick
    /// its lease ends.
    pub fn stored(&self) -> Option<(&str, u64)> {
        let held = self.table.held.get(&self.keys.lock);
        held.map(|h| (h.token.as_str(), tick_of(h.expires)))
    }

    /// The line, in order, dead waiters included: each waiter's token and
    /// the tick its presence ends.
    pub fn line(&self) -> Vec<(&str, u64)> {
        (self.canonical().1.into_iter())
            .map(|(token, until)| (token, tick_of(until)))
            .collect()
    }

    fn canonical(&self) -> FairCanonical<'_> {
        let held = (self.table.held.get(&self.keys.lock)).map(|h| (h.token.as_str(), h.expires));
        let line = self
            .table
            .lines
            .get(&self.keys.lock)
            .map_or_else(Vec::new, |line| {
                let until = |t: &String| line.presence.get(t).copied().unwrap_or_else(|| at(0));
                (line.order.iter())
                    .map(|t| (t.as_str(), until(t)))
                    .collect()
            });
        (held, line)
    }
}

node_identity!(FairNode);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fair_node_hands_the_lock_to_the_first_live_waiter() {
        let mut node = FairNode::new();
        assert!(node.acquire("a", 3, 2, 1));
        assert!(!node.acquire("b", 3, 2, 1), "b waits");
        assert!(!node.acquire("c", 3, 5, 1), "c waits");
        assert_eq!(node.line(), vec![("b", 3), ("c", 6)]);
        assert!(!node.acquire_plain("d", 3, 2), "held");
        // b's presence ran out at 3: c is granted for what is left of its.
        assert_eq!(node.release("a", 3), Some(FairWake::Granted("c".into())));
        assert_eq!(node.stored(), Some(("c", 6)));
        assert_eq!(node.release("a", 3), None, "no longer a's");
        assert!(node.acquire("c", 3, 2, 4), "its grant, taken at its ask");
        assert_eq!(node.stored(), Some(("c", 7)));
        assert!(!node.acquire("b", 3, 2, 4), "b asks again: in line");
        // c gives up holding it: b is granted.
        assert_eq!(
            node.leave("c", 5),
            (true, Some(FairWake::Granted("b".into())))
        );
        assert_eq!(node.release("b", 5), Some(FairWake::Longest));
        assert_eq!(node.holder(5), None);
        assert_eq!(node, FairNode::new(), "nothing left but the counter");
    }
}
