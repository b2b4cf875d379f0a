//! The semaphore's memory twin, with the semantics of its scripts: each
//! holder's permits under one lease, a dead holder's freed when it ends.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::PermitKeys;
use crate::primitive::lease::AcquireReply;
use crate::primitive::lease::memory::{renewed, tidy};

/// Each semaphore's holders, by its holders key: token -> (permits, lease
/// end).
#[derive(Debug, Default, Clone)]
pub(crate) struct PermitTable {
    holders: HashMap<String, HashMap<String, (u32, Instant)>>,
}

impl PermitTable {
    /// Forgets every holder whose lease ended.
    pub(crate) fn sweep(&mut self, now: Instant) {
        self.holders.retain(|_, holders| {
            holders.retain(|_, (_, end)| *end > now);
            !holders.is_empty()
        });
    }

    /// One acquire attempt (`acquire.lua`): `keys.permits` of `keys.limit`.
    pub(crate) fn acquire(
        &mut self,
        keys: &PermitKeys,
        token: &str,
        ttl: Duration,
        (now, at_ms): (Instant, Option<u64>),
    ) -> AcquireReply {
        let (key, limit, permits) = (keys.holders.as_str(), keys.limit, keys.permits);
        let holders = self.holders.entry(key.to_owned()).or_default();
        holders.retain(|_, (_, end)| *end > now);
        if let Some((_, end)) = holders.get_mut(token) {
            *end = now + ttl;
            return AcquireReply::Acquired { fence: 0, at_ms };
        }
        let used: u64 = holders.values().map(|(n, _)| u64::from(*n)).sum();
        if used + u64::from(permits) > u64::from(limit) {
            let first = holders.values().map(|(_, end)| *end).min();
            tidy(&mut self.holders, key);
            return AcquireReply::Busy {
                pttl: first.map(|end| end - now),
            };
        }
        holders.insert(token.to_owned(), (permits, now + ttl));
        AcquireReply::Acquired { fence: 0, at_ms }
    }

    /// Gives a holder's permits back (`release.lua`): `Some((lasted,
    /// permits))` when `token` was among the holders (its lease still
    /// lasted, and the permits it frees: the waiters are woken), else
    /// `None`.
    pub(crate) fn release(
        &mut self,
        keys: &PermitKeys,
        token: &str,
        now: Instant,
    ) -> Option<(bool, u32)> {
        let key = keys.holders.as_str();
        let held = self.holders.get_mut(key).and_then(|h| h.remove(token));
        tidy(&mut self.holders, key);
        held.map(|(permits, end)| (end > now, permits))
    }

    /// Resets a holder's lease, if it lasts (`lease/renew.lua`): to its ttl
    /// from `now`, never shorter for a `watchdog` renewal ([`renewed`]).
    pub(crate) fn renew(
        &mut self,
        keys: &PermitKeys,
        token: &str,
        renewal: (Duration, bool),
        now: Instant,
    ) -> bool {
        let end = (self.holders.get_mut(&keys.holders))
            .and_then(|h| h.get_mut(token))
            .map(|(_, end)| end);
        match end {
            Some(end) if *end > now => {
                *end = renewed(*end, renewal, now);
                true
            }
            _ => false,
        }
    }

    /// How many permits of `keys` are free (`available.lua`).
    pub(crate) fn available(&self, keys: &PermitKeys, limit: u32, now: Instant) -> u32 {
        let used: u64 = self
            .holders
            .get(&keys.holders)
            .map(|h| {
                h.values()
                    .filter(|(_, end)| *end > now)
                    .map(|(n, _)| u64::from(*n))
                    .sum()
            })
            .unwrap_or(0);
        u32::try_from(u64::from(limit).saturating_sub(used)).unwrap_or(0)
    }

    /// The live holders of the semaphore at `holders`: token, permits and
    /// lease end.
    pub(crate) fn holders(&self, holders: &str, now: Instant) -> Vec<(&str, u32, Instant)> {
        self.holders.get(holders).map_or_else(Vec::new, |held| {
            held.iter()
                .filter(|(_, (_, end))| *end > now)
                .map(|(token, (n, end))| (token.as_str(), *n, *end))
                .collect()
        })
    }

    /// Every holder of the semaphore at `holders`, its lease ended or not,
    /// sorted by token (the models' view of the twin).
    #[cfg(feature = "test-util")]
    pub(crate) fn stored(&self, holders: &str) -> Vec<(&str, u32, Instant)> {
        let mut stored: Vec<_> = self.holders.get(holders).map_or_else(Vec::new, |held| {
            held.iter()
                .map(|(token, (n, end))| (token.as_str(), *n, *end))
                .collect()
        });
        stored.sort_unstable();
        stored
    }

    /// How many keys it holds (for the tests that check it stays bounded).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.holders.len()
    }
}
