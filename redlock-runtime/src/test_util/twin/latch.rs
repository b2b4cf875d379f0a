//! A countdown latch's node: `LatchTable`'s steps (`set.lua`,
//! `count_down.lua`) on one latch and its request ids.

use std::sync::Arc;

use super::{TICK, at, digest};
use crate::primitive::latch::memory::LatchTable;
use crate::primitive::latch::{LatchCall, LatchKeys, LatchOp, LatchReply};

/// One node's keys for one countdown latch, as the memory twin holds them.
#[derive(Debug, Clone)]
pub struct LatchNode {
    /// Shared by a node's copies until one of them takes a step.
    table: Arc<LatchTable>,
    keys: Arc<LatchKeys>,
    /// The digest of what the latch holds.
    digest: u64,
}

impl LatchNode {
    /// A node without the latch.
    pub fn new() -> Self {
        let mut node = Self {
            table: Arc::new(LatchTable::default()),
            keys: Arc::new(LatchKeys::new("model:", "latch")),
            digest: 0,
        };
        node.digest = digest(&node.canonical());
        node
    }

    /// Runs one call on this node's copy of the table.
    fn call(&mut self, op: LatchOp<'_>, now: u8) -> LatchReply {
        let call = LatchCall {
            keys: &self.keys,
            op,
        };
        let (reply, _) = Arc::make_mut(&mut self.table).call(&call, at(now));
        self.digest = digest(&self.canonical());
        reply
    }

    /// Sets the latch up with `count`, for `ttl` ticks from `now`: whether
    /// it was absent (a second set-up changes nothing).
    pub fn set(&mut self, count: u64, ttl: u8, now: u8) -> bool {
        let ttl = TICK * u32::from(ttl);
        matches!(
            self.call(LatchOp::Set { count, ttl }, now),
            LatchReply::Counting { .. }
        )
    }

    /// A count-down under the request id `id` at `now`: the count left,
    /// or `None` when the latch is not set up. It counts once per id.
    pub fn count_down(&mut self, id: &str, now: u8) -> Option<u64> {
        match self.call(LatchOp::CountDown { id }, now) {
            LatchReply::Counting { count, .. } => Some(count),
            LatchReply::Absent | LatchReply::AlreadySet => None,
        }
    }

    /// The count left, expired or not; `None` when the latch is not set
    /// up.
    pub fn count(&self) -> Option<u64> {
        self.canonical().map(|(count, _, _)| count)
    }

    /// What the latch holds: its count, when it ends, its request ids.
    fn canonical(&self) -> Option<(u64, tokio::time::Instant, Vec<&str>)> {
        self.table.stored(&self.keys)
    }
}

node_identity!(LatchNode);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latch_node_counts_once_per_id_and_a_second_set_up_changes_nothing() {
        let mut node = LatchNode::new();
        assert_eq!(node.count_down("a", 0), None, "not set up");
        assert!(node.set(2, 10, 0));
        assert!(!node.set(5, 10, 1), "already set up");
        assert_eq!(node.count_down("a", 1), Some(1));
        assert_eq!(node.count_down("a", 2), Some(1), "the same id again");
        let before = node.clone();
        assert_eq!(node.count_down("b", 2), Some(0));
        assert_ne!(node, before);
        assert_eq!(node.count(), Some(0));
    }
}
