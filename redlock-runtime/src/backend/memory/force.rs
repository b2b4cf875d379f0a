//! The operator's forced release in the memory store: the twin of
//! `scripts::FORCE_RELEASE`.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use super::super::{ENDED_KEPT_PAST_LEASE, ForceRelease, ForceReply, Lease};
use super::MemoryBackend;
use crate::wakeups::waiter_id;

impl MemoryBackend {
    /// Ends the lock and the read/write lock of a name, whoever holds them;
    /// raises their fencing counters, keeps the ended holders' ids as long
    /// as the longest ended lease would have lasted (and
    /// `ENDED_KEPT_PAST_LEASE` more), and wakes their waiters.
    pub(crate) fn force_release(&self, force: &ForceRelease<'_>) -> ForceReply {
        let ForceRelease { keys, rw } = *force;
        let now = Instant::now();
        let retention = self.fence_retention;
        let mut reply = ForceReply::default();
        let (head, rw_freed) = {
            let mut state = self.state();
            let state = &mut *state;
            let mut head = None;
            // How long the longest ended lease would have lasted.
            let mut longest = Duration::ZERO;
            if let Some(held) = state
                .locks
                .held
                .remove(&keys.lock)
                .filter(|h| h.expires > now)
            {
                longest = longest.max(held.expires - now);
                reply.ended.push(ended(held.token, Some(held.granted)));
                reply.fence = Some(state.locks.next_fence(&keys.fence, retention));
                // The first fair waiter, by its id (an empty wake-up when
                // no one is in line).
                head = Some(
                    (state.locks.lines.get_mut(&keys.lock))
                        .and_then(|line| line.head(now).map(waiter_id)),
                );
            }
            let writer = state.locks.held.remove(&rw.rw).filter(|h| h.expires > now);
            if let Some(writer) = &writer {
                longest = longest.max(writer.expires - now);
                reply
                    .ended
                    .push(ended(writer.token.clone(), Some(writer.granted)));
                reply.write_fence = Some(state.locks.next_fence(&rw.fence, retention));
            }
            let readers = state.sync.rw.end_readers(&rw.rw, now);
            let rw_freed = writer.is_some() || !readers.is_empty();
            for (token, end) in readers {
                longest = longest.max(end - now);
                reply.ended.push(ended(token, None));
            }
            if !reply.ended.is_empty() {
                let keep = now + longest + ENDED_KEPT_PAST_LEASE;
                let (ids, until) = (state.ended)
                    .entry(keys.ended())
                    .or_insert_with(|| (HashSet::new(), keep));
                ids.extend(reply.ended.iter().map(|lease| waiter_id(&lease.token)));
                *until = (*until).max(keep);
            }
            (head, rw_freed)
        };
        if let Some(head) = head {
            self.wake.released(&keys.lock, head.as_deref());
        }
        if rw_freed {
            self.wake.released(&rw.rw, Some("*"));
        }
        reply
    }
}

/// An ended holder's lease, as the reply names it.
fn ended(token: String, granted: Option<std::time::SystemTime>) -> Lease {
    Lease {
        token,
        left: None,
        granted,
    }
}
