//! The synchronizers in the memory store: their tables (each primitive's
//! twin, in its folder of `primitive/`), run under the store's lock, and
//! the wake-ups their Redis scripts publish.

use tokio::time::Instant;

use super::{MemoryBackend, SWEEP_EVERY};
use crate::primitive::latch::memory::LatchTable;
use crate::primitive::lease::Shared;
use crate::primitive::rw::memory::{Released, RwTable};
use crate::primitive::semaphore::memory::PermitTable;
use crate::primitive::{
    Acquire, AcquireReply, Available, Downgrade, GroupAcquire, GroupReply, LatchCall, LatchReply,
    Renewal, group,
};
use crate::store::subscribe::Message;

/// What the synchronizers keep.
#[derive(Debug, Default)]
pub(super) struct SyncState {
    /// Each read/write lock's readers and waiting writers.
    pub(super) rw: RwTable,
    /// Each semaphore's holders.
    pub(super) permits: PermitTable,
    /// The countdown latches.
    pub(super) latches: LatchTable,
}

impl SyncState {
    /// Forgets every lease, presence and latch that ended.
    pub(super) fn sweep(&mut self, now: Instant) {
        self.rw.sweep(now);
        self.permits.sweep(now);
        self.latches.sweep(now);
    }

    /// How many keys it holds (for the tests that check it stays bounded).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.rw.len() + self.permits.len() + self.latches.len()
    }
}

impl MemoryBackend {
    /// One acquire attempt of a reader, a writer or a semaphore holder.
    pub(super) fn acquire_shared(&self, shared: Shared<'_>, request: &Acquire<'_>) -> AcquireReply {
        let Acquire {
            token,
            ttl,
            want_time,
            line,
            ..
        } = *request;
        let now = Instant::now();
        let at = (now, want_time.then(|| self.now_ms(now)));
        let mut state = self.state();
        let state = &mut *state;
        match shared {
            Shared::Permits(keys) => state.sync.permits.acquire(keys, token, ttl, at),
            Shared::Write(keys) => {
                let retention = self.fence_retention;
                (state.sync.rw).acquire_write(
                    &mut state.locks,
                    keys,
                    token,
                    ttl,
                    line,
                    at,
                    retention,
                )
            }
            Shared::Read(keys) => state
                .sync
                .rw
                .acquire_read(&state.locks, keys, token, ttl, at),
        }
    }

    /// Releases (or gives back) a reader's, a writer's or a semaphore
    /// holder's lease, waking every waiter of the key; `true` when it was
    /// still held.
    pub(super) fn release_shared(&self, shared: Shared<'_>, token: &str) -> bool {
        let now = Instant::now();
        let (key, released, message) = {
            let mut state = self.state();
            let state = &mut *state;
            match shared {
                Shared::Permits(keys) => {
                    let released = state.sync.permits.release(keys, token, now);
                    let (held, message) = match released {
                        Some((held, permits)) => (held, Some(Message::Count(permits))),
                        None => (false, None),
                    };
                    (&keys.holders, held, message)
                }
                Shared::Write(keys) => {
                    let released = state
                        .sync
                        .rw
                        .release_write(&mut state.locks, keys, token, now);
                    (&keys.rw, released.held, wake_all(released))
                }
                Shared::Read(keys) => {
                    let released = state.sync.rw.release_read(keys, token, now);
                    (&keys.rw, released.held, wake_all(released))
                }
            }
        };
        if let Some(message) = message {
            self.wake.released(key, message);
        }
        released
    }

    /// Resets a reader's or a semaphore holder's lease, if it lasts (never
    /// shorter for a `watchdog` renewal).
    pub(super) fn extend_shared(
        &self,
        shared: Shared<'_>,
        renewal: &Renewal<'_>,
        watchdog: bool,
    ) -> bool {
        let Renewal { token, ttl, .. } = *renewal;
        let ttl = (ttl, watchdog);
        let now = Instant::now();
        let mut state = self.state();
        match shared {
            Shared::Permits(keys) => state.sync.permits.renew(keys, token, ttl, now),
            Shared::Read(keys) => state.sync.rw.renew_read(keys, token, ttl, now),
            // A writer's lease is renewed as a lock's.
            Shared::Write(_) => false,
        }
    }

    /// Turns a held write lock into a read lock, waking the readers.
    pub(crate) fn downgrade(&self, downgrade: &Downgrade<'_>) -> bool {
        let Downgrade { keys, token, ttl } = *downgrade;
        let now = Instant::now();
        let done = {
            let mut state = self.state();
            let state = &mut *state;
            (state.sync.rw).downgrade(&mut state.locks, keys, token, ttl, now)
        };
        if done {
            self.wake.released(&keys.rw, Message::All);
        }
        done
    }

    /// How many permits of a semaphore are free.
    pub(crate) fn available(&self, available: &Available<'_>) -> u32 {
        let Available { keys, limit } = *available;
        (self.state().sync.permits).available(keys, limit, Instant::now())
    }

    /// One call on a countdown latch.
    pub(crate) fn latch(&self, call: &LatchCall<'_>) -> LatchReply {
        let now = Instant::now();
        let (reply, wake) = {
            let mut state = self.state();
            state.since_sweep += 1;
            if state.since_sweep >= SWEEP_EVERY {
                state.sweep(now);
            }
            state.sync.latches.call(call, now)
        };
        if wake {
            self.wake.released(&call.keys.latch, Message::All);
        }
        reply
    }

    /// Takes every lock of a group, or none.
    pub(crate) fn acquire_group(&self, group: &GroupAcquire<'_>) -> GroupReply {
        let now = Instant::now();
        let mut state = self.state();
        group::memory::acquire(&mut state.locks, group, now, self.fence_retention)
    }
}

/// The wake-up of a read/write lock's release: every waiter, if any may
/// now get in.
fn wake_all(released: Released) -> Option<Message<'static>> {
    released.wake.then_some(Message::All)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::MemoryBackend;
    use crate::primitive::{
        Acquire, AcquireReply, Keys, LatchCall, LatchKeys, LatchOp, PermitKeys, RwKeys,
    };
    use crate::store::subscribe::Wakeups;

    fn take(memory: &MemoryBackend, keys: &Keys, ttl: Duration) {
        let reply = memory.acquire(&Acquire {
            keys,
            token: "t",
            ttl,
            want_time: false,
            line: None,
            fenced: false,
            fresh: true,
        });
        assert!(matches!(reply, AcquireReply::Acquired { .. }), "{reply:?}");
    }

    /// Readers, permit holders and latches of 30,000 distinct keys whose
    /// holders died (never released): once their ttls end, the next sweep
    /// leaves nothing of them.
    #[tokio::test(start_paused = true)]
    async fn thirty_thousand_dead_holders_leave_nothing_after_their_ttls() {
        let (_wakeups, wake) = Wakeups::local();
        let memory = MemoryBackend::new(Duration::from_secs(60), wake);
        let ttl = Duration::from_secs(5);
        for i in 0..10_000 {
            take(
                &memory,
                &Keys::Read(RwKeys::new("lock:", format!("r:{i}"))),
                ttl,
            );
            take(
                &memory,
                &Keys::Permits(PermitKeys::new("lock:", format!("s:{i}"), 3, 2)),
                ttl,
            );
            let latch = LatchKeys::new("lock:", &format!("l:{i}"));
            let op = LatchOp::Set { count: 2, ttl };
            memory.latch(&LatchCall { keys: &latch, op });
        }
        assert!(memory.entries() >= 30_000, "{}", memory.entries());
        tokio::time::advance(ttl + Duration::from_millis(1)).await;
        // The next sweep (every 1024 calls) forgets them all.
        let one = LatchKeys::new("lock:", "l:0");
        for _ in 0..1024 {
            memory.latch(&LatchCall {
                keys: &one,
                op: LatchOp::Read,
            });
        }
        assert_eq!(memory.entries(), 0, "{} entries left", memory.entries());
    }
}
