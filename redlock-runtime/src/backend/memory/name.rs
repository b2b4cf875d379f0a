//! The operator's verbs in the memory store: their twins' steps
//! (`primitive/name/memory.rs`) under the store's lock, and the wake-ups
//! `force_release.lua` publishes.

use tokio::time::Instant;

use super::{MemoryBackend, State};
use crate::primitive::name::memory::{self, Forced, Tables};
use crate::primitive::name::{ForceRelease, ForceReply, Inspect, Inspection};
use crate::store::subscribe::Message;

impl State {
    /// The tables of a name's primitives.
    fn tables(&mut self) -> Tables<'_> {
        Tables {
            locks: &mut self.locks,
            rw: &mut self.sync.rw,
            permits: &self.sync.permits,
            ended: &mut self.ended,
        }
    }
}

impl MemoryBackend {
    /// Ends the lock and the read/write lock of a name, whoever holds them,
    /// and wakes their waiters.
    pub(crate) fn force_release(&self, force: &ForceRelease<'_>) -> ForceReply {
        let now = Instant::now();
        let Forced {
            reply,
            lock_head,
            rw_freed,
        } = memory::force_release(self.state().tables(), force, now, self.fence_retention);
        if let Some(head) = lock_head {
            let message = head.as_deref().map_or(Message::Longest, Message::Named);
            self.wake.released(&force.keys.lock, message);
        }
        if rw_freed {
            self.wake.released(&force.rw.rw, Message::All);
        }
        reply
    }

    /// Everything kept under one name, leases that ran out left out.
    pub(crate) fn inspect(&self, inspect: &Inspect<'_>) -> Inspection {
        memory::inspect(self.state().tables(), inspect, Instant::now())
    }
}
