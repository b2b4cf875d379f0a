//! The memory store: every primitive's table (each twin's, in its folder
//! of `primitive/`) held under one lock, the steps of the twins run on
//! them, the wake-ups their Redis scripts publish, and the store's clock.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::primitive::fair;
use crate::primitive::lease::Shared;
use crate::primitive::lock::memory::LockTable;
use crate::primitive::name::memory::EndedTable;
use crate::primitive::record::memory::{MAX_RECORDS, RecordTable};
use crate::primitive::{
    Acquire, AcquireReply, Claim, Claimed, Complete, End, Ended, GiveBack, IssueFence, Keys,
    LockKeys, RecordKeys, Renewal,
};
use crate::store::OpError;
use crate::store::subscribe::{Grant, LocalWake, Message, waiter_id};

mod name;
mod sync;

#[derive(Debug)]
struct State {
    /// Who holds each lock (and each read/write lock's writer), fair
    /// mode's lines, the fencing counters.
    locks: LockTable,
    /// Acquisitions since expired entries were last swept.
    since_sweep: usize,
    /// The read/write locks' readers and writers, semaphores, latches
    /// (boxed: most stores never use them).
    sync: Box<sync::SyncState>,
    /// The holders an operator ended.
    ended: EndedTable,
    /// Idempotency records.
    records: RecordTable,
}

/// Sweep expired held, counters, dead waiters and records every this many
/// acquisitions and claims: what nobody asks for again does not pile up.
const SWEEP_EVERY: usize = 1024;

impl State {
    /// Empty, its fencing clock starting at `epoch` (the store's `TIME`).
    fn new(epoch: Instant) -> Self {
        Self {
            locks: LockTable::new(epoch),
            since_sweep: 0,
            sync: Box::default(),
            ended: EndedTable::default(),
            records: RecordTable::new(epoch),
        }
    }

    fn sweep(&mut self, now: Instant) {
        self.locks.sweep(now);
        self.sync.sweep(now);
        self.ended.sweep(now);
        self.records.sweep(now);
        self.since_sweep = 0;
    }
}

/// Locks kept in a map in this process: ttl, fencing and token checks work as
/// on Redis, but nothing is shared with other processes.
#[derive(Debug)]
pub(crate) struct MemoryBackend {
    state: Mutex<State>,
    /// The zero of this store's clock (what `TIME` is on Redis).
    epoch: Instant,
    /// How long a fencing counter is kept after an acquire.
    fence_retention: Duration,
    /// Wakes this process's waiters on a release, as Redis's scripts
    /// publish.
    wake: LocalWake,
}

impl MemoryBackend {
    pub(crate) fn new(fence_retention: Duration, wake: LocalWake) -> Self {
        let epoch = Instant::now();
        Self {
            state: Mutex::new(State::new(epoch)),
            epoch,
            fence_retention,
            wake,
        }
    }

    /// How many entries the store keeps (held, counters, lines): for the
    /// tests that check it stays bounded.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        let state = self.state();
        state.locks.len() + state.sync.len()
    }
}

impl MemoryBackend {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self, now: Instant) -> u64 {
        u64::try_from((now - self.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    /// The instant, and the store's clock when `want_time` (what a
    /// script's `TIME` gives on Redis).
    fn at(&self, want_time: bool) -> (Instant, Option<u64>) {
        let now = Instant::now();
        (now, want_time.then(|| self.now_ms(now)))
    }

    /// The state, swept of what ended every [`SWEEP_EVERY`] acquisitions.
    fn swept_state(&self, now: Instant) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state();
        state.since_sweep += 1;
        if state.since_sweep >= SWEEP_EVERY {
            state.sweep(now);
        }
        state
    }

    pub(crate) fn acquire(&self, request: &Acquire<'_>) -> AcquireReply {
        let Acquire {
            keys,
            token,
            ttl,
            want_time,
            line,
            ..
        } = *request;
        let at = self.at(want_time);
        let keys = match keys {
            Keys::Lock(keys) => keys,
            // Records are claimed, not acquired: refused before this by
            // `Backend::acquire`, as every store refuses them.
            Keys::Record(_) => return AcquireReply::Busy { pttl: None },
            Keys::Read(_) | Keys::Write(_) | Keys::Permits(_) => {
                drop(self.swept_state(at.0));
                return Shared::of(keys).map_or(AcquireReply::Busy { pttl: None }, |shared| {
                    self.acquire_shared(shared, request)
                });
            }
        };
        let retention = self.fence_retention;
        let mut state = self.swept_state(at.0);
        match line {
            Some(presence) => {
                let times = (ttl, presence);
                fair::memory::acquire(&mut state.locks, keys, token, times, at, retention)
            }
            None => {
                // As one Redis: the first attempt of a lock that needs no
                // token now is a plain `SET NX`, which issues none (its
                // token comes on first ask, `issue_fence`); any other
                // attempt runs the acquire script, which issues one.
                let issue = request.fenced || !request.fresh || want_time;
                (state.locks).acquire(keys, token, ttl, at, retention, issue)
            }
        }
    }

    /// Gives back an acquire that returned no guard: the lock if its token
    /// holds it, and (fair) its place in the line; wakes whom that frees.
    pub(crate) fn give_back(&self, give_back: &GiveBack<'_>) -> bool {
        let GiveBack { keys, token, fair } = *give_back;
        let keys = match keys {
            Keys::Lock(keys) => keys,
            Keys::Record(record) => return self.release_record(record, token),
            Keys::Read(_) | Keys::Write(_) | Keys::Permits(_) => {
                return Shared::of(keys).is_some_and(|shared| self.release_shared(shared, token));
            }
        };
        let now = Instant::now();
        if fair {
            let retention = self.fence_retention;
            let (held, next) =
                fair::memory::leave(&mut self.state().locks, keys, token, now, retention);
            if let Some(next) = next {
                self.wake_next(keys, next, now);
            }
            return held;
        }
        let released = self.state().locks.release(keys, token, now);
        if released {
            self.wake.released(&keys.lock, Message::Longest);
        }
        released
    }

    /// Ends a held lock (see [`Backend::end`](super::Backend::end)), and
    /// wakes the waiter that is next: the first in line for a fair lock,
    /// else the longest waiting.
    pub(crate) fn end(&self, end: &End<'_>) -> Ended {
        let End {
            keys,
            token,
            fair,
            hold,
            ..
        } = *end;
        let released = match keys {
            Keys::Lock(keys) => return self.end_lock(keys, token, fair, hold),
            Keys::Record(record) => self.release_record(record, token),
            Keys::Read(_) | Keys::Write(_) | Keys::Permits(_) => {
                Shared::of(keys).is_some_and(|shared| self.release_shared(shared, token))
            }
        };
        match released {
            true => Ended::Deleted,
            false => Ended::NotOwner,
        }
    }

    /// [`end`](Self::end) of a lock.
    fn end_lock(
        &self,
        keys: &LockKeys,
        token: &str,
        fair: bool,
        hold: Option<(u64, Duration)>,
    ) -> Ended {
        let now = Instant::now();
        if let Some(hold) = hold {
            let clock = (now, self.now_ms(now));
            let ended = (self.state().locks).release_after_hold(keys, token, hold, clock);
            if ended == Ended::Deleted {
                self.wake.released(&keys.lock, Message::Longest);
            }
            return ended;
        }
        if fair {
            let retention = self.fence_retention;
            let next = fair::memory::release(&mut self.state().locks, keys, token, now, retention);
            let Some(next) = next else {
                return Ended::NotOwner;
            };
            self.wake_next(keys, next, now);
            return Ended::Deleted;
        }
        if !self.state().locks.release(keys, token, now) {
            return Ended::NotOwner;
        }
        self.wake.released(&keys.lock, Message::Longest);
        Ended::Deleted
    }

    /// Wakes whom a fair release or give-back names, as its script
    /// publishes it: a grant to the waiter the lock was handed to (by its
    /// id, see `waiter_id`: never its token), the first in line by its
    /// id, or a waiter of the key that does not queue.
    fn wake_next(&self, keys: &LockKeys, next: fair::memory::Next, now: Instant) {
        match next {
            fair::memory::Next::Granted { token, fence } => {
                let id = waiter_id(&token);
                let grant = Grant {
                    fence,
                    at_ms: self.now_ms(now),
                };
                (self.wake).released(&keys.lock, Message::Granted { id: &id, grant });
            }
            fair::memory::Next::Named(token) => {
                self.wake
                    .released(&keys.lock, Message::Named(&waiter_id(&token)));
            }
            fair::memory::Next::Longest => self.wake.released(&keys.lock, Message::Longest),
        }
    }

    /// A manual extend: the lease is set to its ttl, shorter or not.
    pub(crate) fn extend(&self, renewal: &Renewal<'_>) -> bool {
        self.renew(renewal, false)
    }

    /// Renews a lease to `renewal`'s ttl, as the renewal scripts do: a
    /// `watchdog` renewal never shortens it (see `lease::memory::renewed`).
    fn renew(&self, renewal: &Renewal<'_>, watchdog: bool) -> bool {
        let Renewal { keys, token, ttl } = *renewal;
        let lock = match keys {
            Keys::Lock(keys) => &keys.lock,
            Keys::Write(rw) => &rw.rw,
            Keys::Record(record) => {
                return (self.state().records).renew(record, token, ttl, Instant::now());
            }
            Keys::Read(_) | Keys::Permits(_) => {
                return Shared::of(keys)
                    .is_some_and(|shared| self.extend_shared(shared, renewal, watchdog));
            }
        };
        (self.state().locks).renew(lock, token, (ttl, watchdog), Instant::now())
    }

    /// Claims an idempotency record.
    pub(crate) fn claim(&self, claim: &Claim<'_>) -> Result<Claimed<u64>, OpError> {
        let now = Instant::now();
        (self.swept_state(now).records)
            .claim(claim, now)
            .ok_or(OpError::Full(MAX_RECORDS))
    }

    /// Completes a claimed record, waking this process's duplicates.
    pub(crate) fn complete(&self, complete: &Complete<'_>) -> bool {
        let Complete {
            keys,
            token,
            result,
            retention,
        } = *complete;
        let done =
            (self.state().records).complete(keys, token, (result, retention), Instant::now());
        if done {
            self.wake.released(&keys.record, Message::Longest);
        }
        done
    }

    /// Releases a claimed record, waking this process's duplicates.
    fn release_record(&self, keys: &RecordKeys, token: &str) -> bool {
        let released = (self.state().records).release(keys, token, Instant::now());
        if released {
            self.wake.released(&keys.record, Message::Longest);
        }
        released
    }

    /// Renews each lease of the watchdog's batch (never shortening one).
    pub(crate) fn extend_many(&self, renewals: &[Renewal<'_>]) -> Vec<Result<bool, OpError>> {
        renewals.iter().map(|r| Ok(self.renew(r, true))).collect()
    }

    /// Issues the fencing token of a lock `token` holds, as
    /// `lock/issue_fence.lua` does: the counter's next.
    pub(crate) fn issue_fence(&self, issue: &IssueFence<'_>) -> Option<u64> {
        let IssueFence { keys, token } = *issue;
        let retention = self.fence_retention;
        (self.state().locks).issue_fence(keys, token, Instant::now(), retention)
    }

    /// Deletes a lock whoever holds it (for tests of lost-lock handling).
    #[cfg(test)]
    pub(crate) fn force_delete(&self, lock_key: &str) {
        self.state().locks.held.remove(lock_key);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Acquire, End, Keys, LockKeys, MemoryBackend};
    use crate::LostReason;
    use crate::store::subscribe::Wakeups;

    /// A fenced acquire: its token is issued with it (a plain one's on
    /// first ask, as on one Redis).
    fn acquire(memory: &MemoryBackend, keys: &Keys, token: &str) -> super::AcquireReply {
        memory.acquire(&Acquire {
            keys,
            token,
            ttl: Duration::from_secs(5),
            want_time: false,
            line: None,
            fenced: true,
            fresh: true,
        })
    }

    fn release(memory: &MemoryBackend, keys: &Keys, token: &str) -> bool {
        let end = End {
            keys,
            token,
            fence: 0,
            fair: false,
            hold: None,
            contended: false,
        };
        memory.end(&end) == super::Ended::Deleted
    }

    #[tokio::test(start_paused = true)]
    async fn a_hundred_thousand_keys_locked_once_leave_nothing_after_the_retention() {
        let (_wakeups, wake) = Wakeups::local();
        let memory = MemoryBackend::new(Duration::from_secs(60), wake);
        let mut last = std::collections::HashMap::new();
        for i in 0..100_000 {
            let keys = Keys::Lock(LockKeys::new("lock:", format!("order:{i}")));
            let reply = acquire(&memory, &keys, "t");
            let super::AcquireReply::Acquired { fence, .. } = reply else {
                panic!("free key");
            };
            last.insert(i, fence);
            assert!(release(&memory, &keys, "t"));
        }
        assert!(
            memory.entries() >= 100_000,
            "counters kept for the retention"
        );
        tokio::time::advance(Duration::from_secs(61)).await;
        // The next sweep (every 1024 acquisitions) forgets them all.
        let one = Keys::Lock(LockKeys::new("lock:", "order:0".into()));
        for _ in 0..1024 {
            acquire(&memory, &one, "u");
            release(&memory, &one, "u");
        }
        assert!(memory.entries() <= 1, "{} entries left", memory.entries());
        // And tokens did not go back for a forgotten counter.
        let keys = Keys::Lock(LockKeys::new("lock:", "order:99999".into()));
        let super::AcquireReply::Acquired { fence, .. } = acquire(&memory, &keys, "v") else {
            panic!("free key");
        };
        assert!(fence > last[&99_999], "{fence} after {}", last[&99_999]);
    }

    #[tokio::test(start_paused = true)]
    async fn deleting_the_key_makes_lost_fire_at_the_next_renewal() {
        let client = crate::LockClient::in_memory();
        let guard = client
            .lock("k")
            .ttl(Duration::from_secs(3))
            .acquire()
            .await
            .expect("acquire");
        client.core().backend().force_delete("lock:{k}");
        let started = tokio::time::Instant::now();
        let reason = guard.lost().await;
        assert_eq!(reason, LostReason::TokenGone);
        assert!(
            started.elapsed() <= Duration::from_secs(1),
            "at the next renewal (ttl/3)"
        );
        assert!(!guard.is_held());
        let err = guard.release().await.expect_err("release of a lost lock");
        assert!(err.is_lost(), "{err}");
    }
}
