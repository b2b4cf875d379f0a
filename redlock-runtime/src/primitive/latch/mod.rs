//! The countdown latch: opens once it has been counted down to zero,
//! each request id counting once. Its keys ([`LatchKeys`]), its one call
//! ([`LatchCall`]), its scripts (`scripts.rs`), its verbs on one Redis
//! (`redis.rs`) and its memory twin (`memory.rs`).

use std::time::Duration;

use super::keys::{suffixed, tagged};

pub(crate) mod memory;
mod redis;
mod scripts;

#[cfg(test)]
pub(crate) use scripts::SCRIPTS;

/// A countdown latch's keys (not a lease: see
/// [`LatchCall`]).
#[derive(Debug, Clone)]
pub(crate) struct LatchKeys {
    /// `prefix{user}:latch`: a hash with the count, expiring with the
    /// latch; the channel its count-downs publish on.
    pub(crate) latch: String,
    /// `prefix{user}:latch:ids`: the request ids of the count-downs done
    /// (a set), so a count-down sent twice counts once.
    pub(crate) ids: String,
}

impl LatchKeys {
    /// The latch `user` under `prefix`.
    pub(crate) fn new(prefix: &str, user: &str) -> Self {
        let latch = tagged(prefix, user, ":latch");
        Self {
            ids: suffixed(&latch, ":ids"),
            latch,
        }
    }

    /// The keys a store routes a call by (they share one slot).
    pub(crate) fn routed(&self) -> [&str; 2] {
        [&self.latch, &self.ids]
    }
}

/// One call on a countdown latch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LatchCall<'a> {
    pub(crate) keys: &'a LatchKeys,
    pub(crate) op: LatchOp<'a>,
}

/// What a [`LatchCall`] does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LatchOp<'a> {
    /// Sets the count, only if the latch is not set up; with its ttl.
    Set { count: u64, ttl: Duration },
    /// Counts down once per request id.
    CountDown { id: &'a str },
    /// Reads the count.
    Read,
}

/// The latch's state after a [`LatchCall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LatchReply {
    /// Not set up (never, or its ttl ended).
    Absent,
    /// Set up, with this count left and this much of its ttl.
    Counting {
        count: u64,
        ttl_left: Option<Duration>,
    },
    /// `Set` found it already set up.
    AlreadySet,
}
