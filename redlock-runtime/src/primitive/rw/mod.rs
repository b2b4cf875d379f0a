//! The read/write lock: many readers or one writer, a waiting writer
//! keeping new readers out. Its keys ([`RwKeys`]), a writer's downgrade
//! ([`Downgrade`]), its scripts (`scripts.rs`), its verbs on one Redis
//! (`redis.rs`) and its memory twin (`memory.rs`).

use std::time::Duration;

use super::keys::{suffixed, tagged};

pub(crate) mod memory;
mod redis;
mod scripts;

#[cfg(test)]
pub(crate) use scripts::SCRIPTS;

/// A read/write lock's keys (both sides).
#[derive(Debug, Clone)]
pub(crate) struct RwKeys {
    /// The key as the user gave it.
    pub(crate) user: String,
    /// `prefix{user}:rw`: the writer's token, with its lease as the
    /// expiry; the channel every release publishes on.
    pub(crate) rw: String,
    /// `prefix{user}:rw:fence`: the writers' fencing counter.
    pub(crate) fence: String,
    /// `prefix{user}:rw:readers`: the readers (a sorted set: token ->
    /// lease deadline on Redis's clock).
    pub(crate) readers: String,
    /// `prefix{user}:rw:writers`: the waiting writers (a sorted set:
    /// token -> presence deadline), which keep new readers out.
    pub(crate) writers: String,
}

impl RwKeys {
    /// The read/write lock `user` under `prefix`.
    pub(crate) fn new(prefix: &str, user: String) -> Self {
        let rw = tagged(prefix, &user, ":rw");
        Self {
            fence: suffixed(&rw, ":fence"),
            readers: suffixed(&rw, ":readers"),
            writers: suffixed(&rw, ":writers"),
            user,
            rw,
        }
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.rw, &self.fence]
    }
}

/// A write lock becomes a read lock in one step, keeping its token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Downgrade<'a> {
    /// The read/write lock's keys.
    pub(crate) keys: &'a RwKeys,
    pub(crate) token: &'a str,
    pub(crate) ttl: Duration,
}
