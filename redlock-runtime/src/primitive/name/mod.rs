//! Everything kept under one name: what an operator reads ([`Inspect`],
//! `inspect.rs` on one Redis) and ends whoever holds it ([`ForceRelease`],
//! `force.rs`), across the primitives that share the name's hash tag (the
//! lock, the read/write lock, the semaphore); their scripts (`scripts.rs`)
//! and their twin in process memory (`memory.rs`).

use std::time::{Duration, SystemTime};

use super::{LockKeys, PermitKeys, RwKeys};

mod force;
mod inspect;
pub(crate) mod memory;
mod scripts;

#[cfg(test)]
pub(crate) use scripts::{FORCE_RELEASE, SCRIPTS};

/// Reads everything kept under one name (see [`Inspection`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inspect<'a> {
    /// The plain lock's keys; the read/write lock's and the semaphore's
    /// share their hash tag.
    pub(crate) keys: &'a LockKeys,
    pub(crate) rw: &'a RwKeys,
    pub(crate) semaphore: &'a PermitKeys,
}

/// One owner's lease as stored: its token (secret: only its public part
/// leaves the crate), the time left, and when the store granted it, where
/// the store knows better than the token's own time (a holder that waited
/// in a line: see `owner::granted`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) token: String,
    pub(crate) left: Option<Duration>,
    pub(crate) granted: Option<SystemTime>,
}

/// What a store keeps under one name, leases that ran out left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Inspection {
    pub(crate) lock: Option<Lease>,
    pub(crate) fence: Option<u64>,
    pub(crate) fair_waiters: u64,
    pub(crate) writer: Option<Lease>,
    pub(crate) write_fence: Option<u64>,
    pub(crate) readers: Vec<Lease>,
    pub(crate) waiting_writers: u64,
    pub(crate) permits: Vec<(Lease, u32)>,
    /// `store::subscribe::waiter_id` of each holder an operator ended, while their
    /// lease would have lasted (see `ForceRelease`).
    pub(crate) ended: Vec<String>,
}

/// Ends the lock and the read/write lock of one name, whoever holds them
/// (the operator's break-glass: `FORCE_RELEASE`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ForceRelease<'a> {
    /// The lock's keys (the name's hash tag: where it is routed).
    pub(crate) keys: &'a LockKeys,
    /// The read/write lock's keys.
    pub(crate) rw: &'a RwKeys,
}

/// How long a forced release keeps the ended holders' ids past the longest
/// ended lease: room for the read that follows a renewal's or release's
/// answer (see `FORCE_RELEASE`).
pub(crate) const ENDED_KEPT_PAST_LEASE: Duration = Duration::from_secs(10);

/// What a forced release ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ForceReply {
    /// The ended holders' leases (their tokens are secrets: only their
    /// public part leaves the crate), time left unknown.
    pub(crate) ended: Vec<Lease>,
    /// The lock's fencing counter as raised, when a holder was ended.
    pub(crate) fence: Option<u64>,
    /// The read/write lock's, when its writer was ended.
    pub(crate) write_fence: Option<u64>,
}
