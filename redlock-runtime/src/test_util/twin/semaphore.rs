//! A leased semaphore's node: `PermitTable`'s steps (`acquire.lua`,
//! `release.lua`, `lease/renew.lua`) on one semaphore's holders.

use std::sync::Arc;

use tokio::time::Instant;

use super::{TICK, at, digest, tick_of};
use crate::primitive::lease::AcquireReply;
use crate::primitive::semaphore::PermitKeys;
use crate::primitive::semaphore::memory::PermitTable;

/// One node's keys for one leased semaphore, as the memory twin holds
/// them.
#[derive(Debug, Clone)]
pub struct SemaphoreNode {
    /// Shared by a node's copies until one of them takes a step.
    table: Arc<PermitTable>,
    /// The semaphore's keys for a lease of `n` permits at `n - 1`.
    keys: Arc<[PermitKeys]>,
    /// The digest of what the semaphore holds.
    digest: u64,
}

impl SemaphoreNode {
    /// A node with a semaphore of `limit` permits and no holder.
    pub fn new(limit: u32) -> Self {
        let keys = (1..=limit.max(1))
            .map(|n| PermitKeys::new("model:", "semaphore".to_owned(), limit, n))
            .collect();
        let mut node = Self {
            table: Arc::new(PermitTable::default()),
            keys,
            digest: 0,
        };
        node.digest = digest(&node.canonical());
        node
    }

    /// Runs one of the twin's steps on this node's copy of the table,
    /// with the keys of a lease of `permits`.
    fn step<R>(
        &mut self,
        permits: u32,
        step: impl FnOnce(&mut PermitTable, &PermitKeys) -> R,
    ) -> R {
        let reply = step(Arc::make_mut(&mut self.table), leased(&self.keys, permits));
        self.digest = digest(&self.canonical());
        reply
    }

    /// An acquire of `permits` by `token` at `now`, for `ttl` ticks:
    /// whether it holds them (a holder already there only has its lease
    /// reset).
    pub fn acquire(&mut self, token: &str, permits: u32, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        let reply = self.step(permits, |table, keys| {
            table.acquire(keys, token, ttl, (at(now), None))
        });
        matches!(reply, AcquireReply::Acquired { .. })
    }

    /// Renews `token`'s lease for `ttl` ticks from `now`: whether it
    /// lasted (the watchdog's renewal: a longer lease is kept).
    pub fn renew(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        self.step(1, |table, keys| {
            table.renew(keys, token, (ttl, true), at(now))
        })
    }

    /// Gives `token`'s permits back at `now`: whether it was a holder.
    pub fn release(&mut self, token: &str, now: u8) -> bool {
        self.step(1, |table, keys| table.release(keys, token, at(now)))
            .is_some()
    }

    /// Every holder, its lease ended or not, sorted by token: its token,
    /// permits and the tick its lease ends.
    pub fn holders(&self) -> Vec<(&str, u32, u64)> {
        (self.canonical().into_iter())
            .map(|(token, permits, end)| (token, permits, tick_of(end)))
            .collect()
    }

    fn canonical(&self) -> Vec<(&str, u32, Instant)> {
        self.table.stored(&leased(&self.keys, 1).holders)
    }
}

/// The keys of a lease of `permits` (at least one, at most the limit).
fn leased(keys: &[PermitKeys], permits: u32) -> &PermitKeys {
    let i = usize::try_from(permits.max(1) - 1).unwrap_or(usize::MAX);
    &keys[i.min(keys.len() - 1)]
}

node_identity!(SemaphoreNode, no default);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semaphore_node_keeps_its_limit_and_frees_an_ended_lease() {
        let mut node = SemaphoreNode::new(2);
        assert!(node.acquire("a", 2, 3, 1));
        assert!(!node.acquire("b", 1, 3, 2), "full");
        assert!(node.acquire("a", 2, 3, 2), "a again: its lease reset");
        assert_eq!(node.holders(), vec![("a", 2, 5)]);
        assert!(!node.renew("a", 3, 5), "ended at 5");
        assert!(node.acquire("b", 1, 3, 5), "a's permits freed");
        assert!(!node.release("a", 5), "dropped");
        assert!(node.release("b", 6));
        assert_eq!(node.holders(), vec![]);
    }
}
