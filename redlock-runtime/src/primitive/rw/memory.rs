//! The read/write lock's memory twin, with the semantics of its scripts:
//! readers each hold a lease, a waiting writer keeps new readers out for
//! its presence, the writer is held in the lock table like a lock.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::RwKeys;
use crate::primitive::lease::AcquireReply;
use crate::primitive::lease::memory::{Leases, live, renewed, tidy};
use crate::primitive::lock::memory::LockTable;

/// The readers and the waiting writers of every read/write lock, by its
/// `:rw` key (the writer itself is in the [`LockTable`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct RwTable {
    readers: HashMap<String, Leases>,
    writers: HashMap<String, Leases>,
}

/// What a release of a reader's or a writer's lease did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Released {
    /// Its lease still lasted.
    pub(crate) held: bool,
    /// Someone may now get in: wake the lock's waiters.
    pub(crate) wake: bool,
}

impl RwTable {
    /// Forgets every lease and presence that ended.
    pub(crate) fn sweep(&mut self, now: Instant) {
        for map in [&mut self.readers, &mut self.writers] {
            map.retain(|_, leases| {
                leases.retain(|_, end| *end > now);
                !leases.is_empty()
            });
        }
    }

    /// One acquire attempt of a writer (`write_acquire.lua`): `line` is
    /// how long a waiting writer keeps new readers out.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acquire_write(
        &mut self,
        locks: &mut LockTable,
        keys: &RwKeys,
        token: &str,
        ttl: Duration,
        line: Option<Duration>,
        (now, at_ms): (Instant, Option<u64>),
        retention: Duration,
    ) -> AcquireReply {
        let (key, fence) = (keys.rw.as_str(), keys.fence.as_str());
        if let Some((holder, _)) = locks.holder(key, now)
            && holder == token
        {
            let fence = locks.fence(fence);
            if let Some(h) = locks.held.get_mut(key) {
                h.expires = now + ttl;
            }
            return AcquireReply::Acquired { fence, at_ms };
        }
        let readers = live(&mut self.readers, key, now);
        let first_reader = readers.values().min().map(|end| *end - now);
        tidy(&mut self.readers, key);
        let busy = locks
            .holder(key, now)
            .map(|(_, left)| left)
            .or(first_reader);
        let writers = live(&mut self.writers, key, now);
        if let Some(pttl) = busy {
            // A writer that does not wait keeps no one out.
            if let Some(presence) = line {
                writers.insert(token.to_owned(), now + presence);
            }
            tidy(&mut self.writers, key);
            return AcquireReply::Busy { pttl: Some(pttl) };
        }
        writers.remove(token);
        tidy(&mut self.writers, key);
        let fence = locks.take((key, fence), token, (now, ttl), retention, true);
        AcquireReply::Acquired { fence, at_ms }
    }

    /// One acquire attempt of a reader (`read_acquire.lua`).
    pub(crate) fn acquire_read(
        &mut self,
        locks: &LockTable,
        keys: &RwKeys,
        token: &str,
        ttl: Duration,
        (now, at_ms): (Instant, Option<u64>),
    ) -> AcquireReply {
        let key = keys.rw.as_str();
        let fence = locks.fence(&keys.fence);
        let mine = self
            .readers
            .get(key)
            .is_some_and(|r| r.get(token).is_some_and(|end| *end > now));
        if !mine {
            if let Some((_, left)) = locks.holder(key, now) {
                return AcquireReply::Busy { pttl: Some(left) };
            }
            let waiting = !live(&mut self.writers, key, now).is_empty();
            tidy(&mut self.writers, key);
            if waiting {
                return AcquireReply::Busy { pttl: None };
            }
        }
        live(&mut self.readers, key, now).insert(token.to_owned(), now + ttl);
        AcquireReply::Acquired { fence, at_ms }
    }

    /// Releases (or gives back) a writer's lease, or its place among the
    /// waiting writers (`write_release.lua`).
    pub(crate) fn release_write(
        &mut self,
        locks: &mut LockTable,
        keys: &RwKeys,
        token: &str,
        now: Instant,
    ) -> Released {
        let key = keys.rw.as_str();
        let mine = locks.held.get(key).is_some_and(|h| h.token == token);
        let held = mine && locks.holder(key, now).is_some();
        if mine {
            locks.held.remove(key);
        }
        let waited = self
            .writers
            .get_mut(key)
            .is_some_and(|w| w.remove(token).is_some());
        tidy(&mut self.writers, key);
        Released {
            held,
            wake: mine || waited,
        }
    }

    /// Releases (or gives back) a reader's lease (`read_release.lua`):
    /// the waiting writers are woken.
    pub(crate) fn release_read(&mut self, keys: &RwKeys, token: &str, now: Instant) -> Released {
        let key = keys.rw.as_str();
        let end = self.readers.get_mut(key).and_then(|r| r.remove(token));
        tidy(&mut self.readers, key);
        let writers = self.writers.contains_key(key);
        Released {
            held: end.is_some_and(|end| end > now),
            wake: end.is_some() && writers,
        }
    }

    /// Resets a reader's lease, if it lasts (`lease/renew.lua`): to its ttl
    /// from `now`, never shorter for a `watchdog` renewal ([`renewed`]).
    pub(crate) fn renew_read(
        &mut self,
        keys: &RwKeys,
        token: &str,
        renewal: (Duration, bool),
        now: Instant,
    ) -> bool {
        match self
            .readers
            .get_mut(&keys.rw)
            .and_then(|r| r.get_mut(token))
        {
            Some(end) if *end > now => {
                *end = renewed(*end, renewal, now);
                true
            }
            _ => false,
        }
    }

    /// Turns a held write lock into a read lock (`downgrade.lua`): `true`
    /// when `token` held the write lock (the readers are then woken).
    pub(crate) fn downgrade(
        &mut self,
        locks: &mut LockTable,
        keys: &RwKeys,
        token: &str,
        ttl: Duration,
        now: Instant,
    ) -> bool {
        if locks
            .holder(&keys.rw, now)
            .is_none_or(|(holder, _)| holder != token)
        {
            return false;
        }
        locks.held.remove(&keys.rw);
        live(&mut self.readers, &keys.rw, now).insert(token.to_owned(), now + ttl);
        true
    }

    /// Ends every reader of the read/write lock at `rw`: the tokens of
    /// those whose lease lasted, with its end (`FORCE_RELEASE`).
    pub(crate) fn end_readers(&mut self, rw: &str, now: Instant) -> Vec<(String, Instant)> {
        let readers = self.readers.remove(rw).unwrap_or_default();
        readers.into_iter().filter(|(_, end)| *end > now).collect()
    }

    /// The live readers of the read/write lock at `rw`, with their ends.
    pub(crate) fn readers(&self, rw: &str, now: Instant) -> Vec<(&str, Instant)> {
        self.readers.get(rw).map_or_else(Vec::new, |readers| {
            readers
                .iter()
                .filter(|(_, end)| **end > now)
                .map(|(token, end)| (token.as_str(), *end))
                .collect()
        })
    }

    /// How many writers wait for the read/write lock at `rw`.
    pub(crate) fn waiting_writers(&self, rw: &str, now: Instant) -> u64 {
        self.writers.get(rw).map_or(0, |writers| {
            writers.values().filter(|end| **end > now).count() as u64
        })
    }

    /// Every reader of the read/write lock at `rw`, its lease ended or
    /// not, and every waiting writer's presence, sorted (the models' view
    /// of the twin).
    #[cfg(feature = "test-util")]
    pub(crate) fn stored(&self, rw: &str) -> [Vec<(&str, Instant)>; 2] {
        [&self.readers, &self.writers].map(|map| {
            let mut leases: Vec<_> = map.get(rw).map_or_else(Vec::new, |leases| {
                leases.iter().map(|(t, end)| (t.as_str(), *end)).collect()
            });
            leases.sort_unstable();
            leases
        })
    }

    /// How many keys it holds (for the tests that check it stays bounded).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.readers.len() + self.writers.len()
    }
}
