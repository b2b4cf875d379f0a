//! A lock: its keys ([`LockKeys`]), the fencing token issued on first
//! ask ([`IssueFence`]), its scripts (`scripts.rs` and the `.lua` files
//! beside it), its verbs on one Redis (`redis.rs`; the one-step calls
//! that concurrent callers share, `plain.rs`, which are [`Call`]s the
//! coalescer of `store/server/` may batch; without scripts where the
//! server has conditional commands, `conditional.rs`; with replicas,
//! `acknowledged.rs`) and its twin in process memory (`memory.rs`).

use super::keys::{suffixed, tagged};

mod acknowledged;
mod call;
pub(crate) mod conditional;
pub(crate) mod memory;
mod plain;
mod redis;
mod scripts;

pub(crate) use call::Call;
pub(crate) use scripts::{ACQUIRE, BATCH, EXTEND, ISSUE_FENCE, RELEASE, RELEASE_AFTER_HOLD};
#[cfg(test)]
pub(crate) use scripts::{ACQUIRE_LOCK, RELEASE_LOCK, SCRIPTS};

/// A lock's keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct LockKeys {
    /// The key as the user gave it (for errors and logs).
    pub(crate) user: String,
    /// `prefix{user}`: holds the owner's token, with the lease as its
    /// expiry; the channel its releases publish on.
    pub(crate) lock: String,
    /// `prefix{user}:fence`: the fencing counter, kept for the retention
    /// after each acquire (tokens never go back: see `design`).
    pub(crate) fence: String,
    /// `prefix{user}:waited`: the waiters' signal, which a waiter's busy
    /// attempt sets and the release deletes, publishing when it was there
    /// (see `scripts/shared/waiting.lua`).
    pub(crate) waited: String,
}

impl LockKeys {
    /// The lock `user` under `prefix`.
    pub(crate) fn new(prefix: &str, user: String) -> Self {
        let lock = tagged(prefix, &user, "");
        Self {
            fence: suffixed(&lock, ":fence"),
            waited: suffixed(&lock, ":waited"),
            user,
            lock,
        }
    }

    /// Fair mode: the waiters' tokens in arrival order (a list).
    pub(crate) fn queue(&self) -> String {
        suffixed(&self.lock, ":queue")
    }

    /// Fair mode: each waiter's presence deadline (a sorted set).
    pub(crate) fn waiters(&self) -> String {
        suffixed(&self.lock, ":waiters")
    }

    /// The holders of this name's lock and read/write lock that an
    /// operator ended (a set of their `waiter_id`s: see
    /// `primitive/name/force_release.lua`).
    pub(crate) fn ended(&self) -> String {
        suffixed(&self.lock, ":ended")
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.lock, &self.fence]
    }

    /// The hash tag the keys share (what Redis Cluster hashes): the
    /// first `{..}` of the lock's key, which a prefix may hold too.
    pub(crate) fn tag(&self) -> &str {
        let lock = self.lock.as_str();
        lock.find('{')
            .and_then(|open| {
                let rest = &lock[open + 1..];
                rest.find('}')
                    .filter(|&len| len > 0)
                    .map(|len| &rest[..len])
            })
            .unwrap_or(lock)
    }
}

/// Issues a held lock's fencing token, if `token` still holds it (only a
/// plain lock's is issued on first ask: every other lease gets its token,
/// if any, with its acquire).
#[derive(Debug, Clone, Copy)]
pub(crate) struct IssueFence<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) token: &'a str,
}
