//! The leased semaphore: up to a limit of permits held at once, each
//! holder's under one lease. Its keys ([`PermitKeys`]), the free-permit
//! read ([`Available`]), its scripts (`scripts.rs`), its verbs on one
//! Redis (`redis.rs`) and its memory twin (`memory.rs`).

use super::keys::{suffixed, tagged};

pub(crate) mod memory;
mod redis;
mod scripts;

#[cfg(test)]
pub(crate) use scripts::SCRIPTS;

/// A semaphore's keys, and the permits one lease of it takes.
#[derive(Debug, Clone)]
pub(crate) struct PermitKeys {
    /// The key as the user gave it.
    pub(crate) user: String,
    /// `prefix{user}:sem`: the holders (a sorted set: token -> lease
    /// deadline); the channel releases publish on.
    pub(crate) holders: String,
    /// `prefix{user}:sem:permits`: each holder's permit count (a hash).
    pub(crate) counts: String,
    /// The semaphore's limit.
    pub(crate) limit: u32,
    /// The permits this lease takes.
    pub(crate) permits: u32,
}

impl PermitKeys {
    /// `permits` of the semaphore `user` of `limit`, under `prefix`.
    pub(crate) fn new(prefix: &str, user: String, limit: u32, permits: u32) -> Self {
        let holders = tagged(prefix, &user, ":sem");
        Self {
            counts: suffixed(&holders, ":permits"),
            user,
            holders,
            limit,
            permits,
        }
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.holders, &self.counts]
    }
}

/// Reads how many permits of a semaphore are free.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Available<'a> {
    pub(crate) keys: &'a PermitKeys,
    pub(crate) limit: u32,
}
