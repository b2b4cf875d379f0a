//! The countdown latch's memory twin, with the semantics of its scripts:
//! a count-down counts once per request id.

use std::collections::{HashMap, HashSet};

use tokio::time::Instant;

#[cfg(feature = "test-util")]
use super::LatchKeys;
use super::{LatchCall, LatchOp, LatchReply};

/// Every latch, by its key.
#[derive(Debug, Default, Clone)]
pub(crate) struct LatchTable {
    latches: HashMap<String, Latch>,
}

#[derive(Debug, Clone)]
struct Latch {
    count: u64,
    expires: Instant,
    /// The count-downs done.
    ids: HashSet<String>,
}

impl LatchTable {
    /// Forgets every latch whose ttl ended.
    pub(crate) fn sweep(&mut self, now: Instant) {
        self.latches.retain(|_, latch| latch.expires > now);
    }

    /// One call (`set.lua`, `count_down.lua`, `read.lua`): its reply, and
    /// whether the latch's waiters are to be woken (it was set up, or
    /// counted down to zero).
    pub(crate) fn call(&mut self, call: &LatchCall<'_>, now: Instant) -> (LatchReply, bool) {
        let LatchCall { keys, op } = *call;
        let latches = &mut self.latches;
        if latches.get(&keys.latch).is_some_and(|l| l.expires <= now) {
            latches.remove(&keys.latch);
        }
        match (op, latches.get_mut(&keys.latch)) {
            (LatchOp::Set { .. }, Some(_)) => (LatchReply::AlreadySet, false),
            (LatchOp::Set { count, ttl }, None) => {
                latches.insert(
                    keys.latch.clone(),
                    Latch {
                        count,
                        expires: now + ttl,
                        ids: HashSet::new(),
                    },
                );
                let ttl_left = Some(ttl);
                (LatchReply::Counting { count, ttl_left }, true)
            }
            (LatchOp::CountDown { id }, Some(latch)) => {
                let counted = latch.count > 0 && latch.ids.insert(id.to_owned());
                if counted {
                    latch.count -= 1;
                }
                let reply = LatchReply::Counting {
                    count: latch.count,
                    ttl_left: None,
                };
                (reply, counted && latch.count == 0)
            }
            (LatchOp::Read, Some(latch)) => {
                let reply = LatchReply::Counting {
                    count: latch.count,
                    ttl_left: Some(latch.expires - now),
                };
                (reply, false)
            }
            (LatchOp::CountDown { .. } | LatchOp::Read, None) => (LatchReply::Absent, false),
        }
    }

    /// The latch at `keys`, expired or not: its count, when it ends, and
    /// the request ids counted, sorted (the models' view of the twin).
    #[cfg(feature = "test-util")]
    pub(crate) fn stored(&self, keys: &LatchKeys) -> Option<(u64, Instant, Vec<&str>)> {
        let latch = self.latches.get(&keys.latch)?;
        let mut ids: Vec<&str> = latch.ids.iter().map(String::as_str).collect();
        ids.sort_unstable();
        Some((latch.count, latch.expires, ids))
    }

    /// How many keys it holds (for the tests that check it stays bounded).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.latches.len()
    }
}
