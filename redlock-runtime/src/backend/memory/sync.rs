//! The synchronizers in memory, with the same semantics as their Redis
//! scripts (`backend/sync/`): readers and semaphore holders each hold a
//! lease, a waiting writer keeps new readers out for its presence, a
//! latch counts down once per request id, a group of locks is taken all
//! or none.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use super::super::{
    Acquire, AcquireReply, Available, Downgrade, GroupAcquire, GroupReply, Inspection, Keys,
    LatchCall, LatchOp, LatchReply, Lease, Renewal,
};
use super::{MemoryBackend, State};

/// Leases by token, each with its end.
type Leases = HashMap<String, Instant>;

/// What the synchronizers keep, by key.
#[derive(Debug, Default)]
pub(super) struct SyncState {
    /// Each read/write lock's readers.
    readers: HashMap<String, Leases>,
    /// Each read/write lock's waiting writers (their presence).
    writers: HashMap<String, Leases>,
    /// Each semaphore's holders: token -> (permits, lease end).
    permits: HashMap<String, HashMap<String, (u32, Instant)>>,
    latches: HashMap<String, Latch>,
}

#[derive(Debug)]
struct Latch {
    count: u64,
    expires: Instant,
    /// The count-downs done.
    ids: HashSet<String>,
}

impl SyncState {
    /// Forgets every lease, presence and latch that ended.
    pub(super) fn sweep(&mut self, now: Instant) {
        for map in [&mut self.readers, &mut self.writers] {
            map.retain(|_, leases| {
                leases.retain(|_, end| *end > now);
                !leases.is_empty()
            });
        }
        self.permits.retain(|_, holders| {
            holders.retain(|_, (_, end)| *end > now);
            !holders.is_empty()
        });
        self.latches.retain(|_, latch| latch.expires > now);
    }

    /// Ends every reader of the read/write lock at `rw`: the tokens of
    /// those whose lease lasted, with its end (`FORCE_RELEASE`).
    pub(super) fn end_readers(&mut self, rw: &str, now: Instant) -> Vec<(String, Instant)> {
        let readers = self.readers.remove(rw).unwrap_or_default();
        readers.into_iter().filter(|(_, end)| *end > now).collect()
    }

    /// Fills in the readers, waiting writers and permit holders of the
    /// read/write lock at `rw` and the semaphore at `semaphore`.
    pub(super) fn inspect_into(
        &self,
        rw: &str,
        semaphore: &str,
        now: Instant,
        out: &mut Inspection,
    ) {
        let lease = |token: &String, end: &Instant| Lease {
            token: token.clone(),
            left: Some(*end - now),
            granted: None,
        };
        if let Some(readers) = self.readers.get(rw) {
            out.readers = readers
                .iter()
                .filter(|(_, end)| **end > now)
                .map(|(t, end)| lease(t, end))
                .collect();
        }
        if let Some(writers) = self.writers.get(rw) {
            out.waiting_writers = writers.values().filter(|end| **end > now).count() as u64;
        }
        if let Some(holders) = self.permits.get(semaphore) {
            out.permits = holders
                .iter()
                .filter(|(_, (_, end))| *end > now)
                .map(|(t, (n, end))| (lease(t, end), *n))
                .collect();
        }
    }

    /// How many keys it holds (for the tests that check it stays bounded).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.readers.len() + self.writers.len() + self.permits.len() + self.latches.len()
    }
}

/// The live leases of `key` in `map` (the ended ones dropped).
fn live<'a>(map: &'a mut HashMap<String, Leases>, key: &str, now: Instant) -> &'a mut Leases {
    let leases = map.entry(key.to_owned()).or_default();
    leases.retain(|_, end| *end > now);
    leases
}

/// Drops `key` from `map` once it has no lease left.
fn tidy<V>(map: &mut HashMap<String, HashMap<String, V>>, key: &str) {
    if map.get(key).is_some_and(HashMap::is_empty) {
        map.remove(key);
    }
}

impl State {
    /// The writer holding `lock`, while its lease lasts: (token, left).
    fn writer(&self, lock: &str, now: Instant) -> Option<(&str, Duration)> {
        self.held
            .get(lock)
            .filter(|h| h.expires > now)
            .map(|h| (h.token.as_str(), h.expires - now))
    }
}

impl MemoryBackend {
    /// One acquire attempt of a reader, a writer or a semaphore holder.
    pub(super) fn acquire_shared(&self, request: &Acquire<'_>) -> AcquireReply {
        let Acquire {
            keys,
            token,
            ttl,
            want_time,
            line,
            ..
        } = *request;
        let now = Instant::now();
        let at_ms = want_time.then(|| self.now_ms(now));
        let mut state = self.state();
        let state = &mut *state;
        match keys {
            Keys::Permits(p) => {
                let (key, limit, permits) = (p.holders.as_str(), p.limit, p.permits);
                let holders = state.sync.permits.entry(key.to_owned()).or_default();
                holders.retain(|_, (_, end)| *end > now);
                if let Some((_, end)) = holders.get_mut(token) {
                    *end = now + ttl;
                    return AcquireReply::Acquired { fence: 0, at_ms };
                }
                let used: u64 = holders.values().map(|(n, _)| u64::from(*n)).sum();
                if used + u64::from(permits) > u64::from(limit) {
                    let first = holders.values().map(|(_, end)| *end).min();
                    tidy(&mut state.sync.permits, key);
                    return AcquireReply::Busy {
                        pttl: first.map(|end| end - now),
                    };
                }
                holders.insert(token.to_owned(), (permits, now + ttl));
                AcquireReply::Acquired { fence: 0, at_ms }
            }
            Keys::Write(rw) => {
                let (key, fence) = (rw.rw.as_str(), rw.fence.as_str());
                if let Some((holder, _)) = state.writer(key, now)
                    && holder == token
                {
                    let fence = state.fence(fence);
                    if let Some(h) = state.held.get_mut(key) {
                        h.expires = now + ttl;
                    }
                    return AcquireReply::Acquired { fence, at_ms };
                }
                let readers = live(&mut state.sync.readers, key, now);
                let first_reader = readers.values().min().map(|end| *end - now);
                tidy(&mut state.sync.readers, key);
                let busy = state
                    .writer(key, now)
                    .map(|(_, left)| left)
                    .or(first_reader);
                let writers = live(&mut state.sync.writers, key, now);
                if let Some(pttl) = busy {
                    // A writer that does not wait keeps no one out.
                    if let Some(presence) = line {
                        writers.insert(token.to_owned(), now + presence);
                    }
                    tidy(&mut state.sync.writers, key);
                    return AcquireReply::Busy { pttl: Some(pttl) };
                }
                writers.remove(token);
                tidy(&mut state.sync.writers, key);
                let fence = state.take((key, fence), token, now + ttl, self.fence_retention, true);
                AcquireReply::Acquired { fence, at_ms }
            }
            Keys::Read(rw) => {
                let key = rw.rw.as_str();
                let fence = state.fence(&rw.fence);
                let mine = state
                    .sync
                    .readers
                    .get(key)
                    .is_some_and(|r| r.get(token).is_some_and(|end| *end > now));
                if !mine {
                    if let Some((_, left)) = state.writer(key, now) {
                        return AcquireReply::Busy { pttl: Some(left) };
                    }
                    let waiting = !live(&mut state.sync.writers, key, now).is_empty();
                    tidy(&mut state.sync.writers, key);
                    if waiting {
                        return AcquireReply::Busy { pttl: None };
                    }
                }
                live(&mut state.sync.readers, key, now).insert(token.to_owned(), now + ttl);
                AcquireReply::Acquired { fence, at_ms }
            }
            // Not a synchronizer's lease: nothing taken.
            Keys::Lock(_) | Keys::Record(_) => AcquireReply::Busy { pttl: None },
        }
    }

    /// Releases (or gives back) a reader's, a writer's or a semaphore
    /// holder's lease, waking every waiter of the key; `true` when it was
    /// still held.
    pub(super) fn release_shared(&self, keys: &Keys, token: &str) -> bool {
        let now = Instant::now();
        let key = keys.main();
        let mut freed = None;
        let (released, wake) = {
            let mut state = self.state();
            let state = &mut *state;
            match keys {
                Keys::Permits(_) => {
                    let held = state
                        .sync
                        .permits
                        .get_mut(key)
                        .and_then(|h| h.remove(token));
                    tidy(&mut state.sync.permits, key);
                    freed = held.map(|(n, _)| n);
                    let end = held.map(|(_, end)| end);
                    (end.is_some_and(|end| end > now), end.is_some())
                }
                Keys::Write(_) => {
                    let mine = state.held.get(key).is_some_and(|h| h.token == token);
                    let live = mine && state.writer(key, now).is_some();
                    if mine {
                        state.held.remove(key);
                    }
                    let waited = state
                        .sync
                        .writers
                        .get_mut(key)
                        .is_some_and(|w| w.remove(token).is_some());
                    tidy(&mut state.sync.writers, key);
                    (live, mine || waited)
                }
                Keys::Read(_) => {
                    let end = state
                        .sync
                        .readers
                        .get_mut(key)
                        .and_then(|r| r.remove(token));
                    tidy(&mut state.sync.readers, key);
                    let writers = state.sync.writers.contains_key(key);
                    (end.is_some_and(|end| end > now), end.is_some() && writers)
                }
                // Not a synchronizer's lease.
                Keys::Lock(_) | Keys::Record(_) => (false, false),
            }
        };
        if wake {
            let message = freed.map_or_else(|| "*".to_owned(), |n| format!("*{n}"));
            self.wake.released(key, Some(&message));
        }
        released
    }

    /// Resets a reader's or a semaphore holder's lease, if it lasts.
    pub(super) fn extend_shared(&self, renewal: &Renewal<'_>) -> bool {
        let Renewal { keys, token, ttl } = *renewal;
        let now = Instant::now();
        let mut state = self.state();
        let end = match keys {
            Keys::Permits(p) => state
                .sync
                .permits
                .get_mut(&p.holders)
                .and_then(|h| h.get_mut(token))
                .map(|(_, end)| end),
            Keys::Read(rw) => state
                .sync
                .readers
                .get_mut(&rw.rw)
                .and_then(|r| r.get_mut(token)),
            Keys::Lock(_) | Keys::Write(_) | Keys::Record(_) => None,
        };
        match end {
            Some(end) if *end > now => {
                *end = (*end).max(now + ttl);
                true
            }
            _ => false,
        }
    }

    /// Turns a held write lock into a read lock, waking the readers.
    pub(crate) fn downgrade(&self, downgrade: &Downgrade<'_>) -> bool {
        let Downgrade { keys, token, ttl } = *downgrade;
        let now = Instant::now();
        {
            let mut state = self.state();
            if state
                .writer(&keys.rw, now)
                .is_none_or(|(holder, _)| holder != token)
            {
                return false;
            }
            state.held.remove(&keys.rw);
            live(&mut state.sync.readers, &keys.rw, now).insert(token.to_owned(), now + ttl);
        }
        self.wake.released(&keys.rw, Some("*"));
        true
    }

    /// How many permits of a semaphore are free.
    pub(crate) fn available(&self, available: &Available<'_>) -> u32 {
        let now = Instant::now();
        let state = self.state();
        let used: u64 = state
            .sync
            .permits
            .get(&available.keys.holders)
            .map(|h| {
                h.values()
                    .filter(|(_, end)| *end > now)
                    .map(|(n, _)| u64::from(*n))
                    .sum()
            })
            .unwrap_or(0);
        u32::try_from(u64::from(available.limit).saturating_sub(used)).unwrap_or(0)
    }

    /// One call on a countdown latch.
    pub(crate) fn latch(&self, call: &LatchCall<'_>) -> LatchReply {
        let LatchCall { keys, op } = *call;
        let now = Instant::now();
        let (reply, wake) = {
            let mut state = self.state();
            state.since_sweep += 1;
            if state.since_sweep >= super::SWEEP_EVERY {
                state.sweep(now);
            }
            let latches = &mut state.sync.latches;
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
        };
        if wake {
            self.wake.released(&keys.latch, Some("*"));
        }
        reply
    }

    /// Takes every lock of a group, or none.
    pub(crate) fn acquire_group(&self, group: &GroupAcquire<'_>) -> GroupReply {
        let GroupAcquire {
            all, token, ttl, ..
        } = *group;
        let now = Instant::now();
        let mut state = self.state();
        for (index, keys) in all.iter().enumerate() {
            if let Some((holder, left)) = state.writer(&keys.lock, now)
                && holder != token
            {
                return GroupReply::Busy {
                    index,
                    pttl: Some(left),
                };
            }
        }
        let fences = all
            .iter()
            .map(|keys| {
                if state.writer(&keys.lock, now).is_some() {
                    if let Some(h) = state.held.get_mut(&keys.lock) {
                        h.expires = now + ttl;
                    }
                    state.fence(&keys.fence)
                } else {
                    let (lock, fence) = (&keys.lock, &keys.fence);
                    state.take((lock, fence), token, now + ttl, self.fence_retention, true)
                }
            })
            .collect();
        GroupReply::Acquired(fences)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::super::{
        Acquire, AcquireReply, Keys, LatchCall, LatchKeys, LatchOp, PermitKeys, RwKeys,
    };
    use super::MemoryBackend;
    use crate::wakeups::Wakeups;

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
