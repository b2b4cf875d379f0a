//! A read/write lock's node: `RwTable`'s steps (`read_acquire.lua`,
//! `write_acquire.lua`, `downgrade.lua`, `read_release.lua`,
//! `write_release.lua`, `lease/renew.lua`), with the writer held in a
//! `LockTable` as the memory store holds it.

use std::sync::Arc;

use tokio::time::Instant;

use super::{RETENTION, TICK, at, clock_zero, digest};
use crate::primitive::lease::AcquireReply;
use crate::primitive::lock::memory::LockTable;
use crate::primitive::rw::RwKeys;
use crate::primitive::rw::memory::RwTable;

/// What a read/write node holds: the writer's token and lease end, the
/// readers' and the waiting writers', sorted. The writers' fencing counter
/// is left out: no step's outcome depends on it.
type RwCanonical<'a> = (Option<(&'a str, Instant)>, [Vec<(&'a str, Instant)>; 2]);

/// One node's keys for one read/write lock, as the memory twin holds them.
/// Its writers never wait in line (a writer that does not wait keeps no
/// reader out), so the waiting writers' set stays empty.
#[derive(Debug, Clone)]
pub struct RwNode {
    /// The readers and waiting writers, shared by a node's copies until
    /// one of them takes a step.
    rw: Arc<RwTable>,
    /// The writer, likewise.
    locks: Arc<LockTable>,
    keys: Arc<RwKeys>,
    /// The digest of [`canonical`](Self::canonical).
    digest: u64,
}

impl RwNode {
    /// A node with the read/write lock free.
    pub fn new() -> Self {
        let mut node = Self {
            rw: Arc::new(RwTable::default()),
            locks: Arc::new(LockTable::new(clock_zero(0))),
            keys: Arc::new(RwKeys::new("model:", "rw".to_owned())),
            digest: 0,
        };
        node.digest = digest(&node.canonical());
        node
    }

    /// Runs one of the twin's steps on this node's copy of the tables.
    fn step<R>(&mut self, step: impl FnOnce(&mut RwTable, &mut LockTable, &RwKeys) -> R) -> R {
        let (rw, locks) = (Arc::make_mut(&mut self.rw), Arc::make_mut(&mut self.locks));
        let reply = step(rw, locks, &self.keys);
        self.digest = digest(&self.canonical());
        reply
    }

    /// A reader's acquire by `token` at `now` for `ttl` ticks: whether it
    /// got in (a reader already in has its lease reset).
    pub fn acquire_read(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        let reply =
            self.step(|rw, locks, keys| rw.acquire_read(locks, keys, token, ttl, (at(now), None)));
        matches!(reply, AcquireReply::Acquired { .. })
    }

    /// A writer's acquire by `token` at `now` for `ttl` ticks, without
    /// waiting in line: whether it got in.
    pub fn acquire_write(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        let reply = self.step(|rw, locks, keys| {
            rw.acquire_write(locks, keys, token, ttl, None, (at(now), None), RETENTION)
        });
        matches!(reply, AcquireReply::Acquired { .. })
    }

    /// Turns `token`'s write lock into a read lock for `ttl` ticks from
    /// `now`: whether it held the write lock.
    pub fn downgrade(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        self.step(|rw, locks, keys| rw.downgrade(locks, keys, token, ttl, at(now)))
    }

    /// Renews `token`'s read lease for `ttl` ticks from `now`: whether it
    /// lasted (the watchdog's renewal: a longer lease is kept).
    pub fn renew_read(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        self.step(|rw, _, keys| rw.renew_read(keys, token, (ttl, true), at(now)))
    }

    /// Renews `token`'s write lease for `ttl` ticks from `now`: whether it
    /// lasted (the watchdog's renewal: a longer lease is kept).
    pub fn renew_write(&mut self, token: &str, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        self.step(|_, locks, keys| locks.renew(&keys.rw, token, (ttl, true), at(now)))
    }

    /// Releases `token`'s read lease at `now`: whether it lasted.
    pub fn release_read(&mut self, token: &str, now: u8) -> bool {
        self.step(|rw, _, keys| rw.release_read(keys, token, at(now)).held)
    }

    /// Releases `token`'s write lease at `now`: whether it lasted.
    pub fn release_write(&mut self, token: &str, now: u8) -> bool {
        self.step(|rw, locks, keys| rw.release_write(locks, keys, token, at(now)).held)
    }

    /// The writer's token, its lease ended or not.
    pub fn stored_writer(&self) -> Option<&str> {
        self.canonical().0.map(|(token, _)| token)
    }

    fn canonical(&self) -> RwCanonical<'_> {
        let writer = (self.locks.held.get(&self.keys.rw)).map(|h| (h.token.as_str(), h.expires));
        (writer, self.rw.stored(&self.keys.rw))
    }
}

node_identity!(RwNode);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rw_node_lets_readers_share_and_a_writer_hold_alone_then_downgrade() {
        let mut node = RwNode::new();
        assert!(node.acquire_read("r1", 3, 1));
        assert!(node.acquire_read("r2", 3, 1));
        assert!(!node.acquire_write("w", 3, 2), "readers in");
        assert!(node.release_read("r1", 2));
        assert!(node.acquire_write("w", 3, 4), "r2's lease ended at 4");
        assert!(!node.acquire_read("r3", 3, 4), "a writer holds");
        assert!(!node.downgrade("r3", 3, 5), "not the writer");
        assert!(node.renew_write("w", 3, 5));
        assert!(node.downgrade("w", 3, 6));
        assert_eq!(node.stored_writer(), None);
        assert!(
            node.acquire_read("r3", 3, 6),
            "readers beside the downgraded"
        );
        assert!(!node.renew_read("w", 3, 9), "ended at 9");
    }
}
