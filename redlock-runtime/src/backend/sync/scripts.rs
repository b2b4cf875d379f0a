//! The scripts of the synchronizers (the `.lua` files beside this one): the read/write lock, the semaphore,
//! the countdown latch, and the multi-lock's group of keys under one hash
//! tag. Each takes all its keys in `KEYS` (one hash tag), reads the time
//! from Redis's `TIME` only, and is safe to send twice: a repeated acquire
//! finds its own token and keeps it, a repeated release or count-down
//! finds nothing left to do.
//!
//! Leases of readers and of semaphore holders live in a sorted set (token
//! -> lease deadline, ms on Redis's clock); every acquire first drops the
//! members whose deadline passed, so a dead holder frees its share within
//! its ttl, and each set's own expiry is kept at least as long as its
//! longest lease, so nothing is left once the last holder is gone.

use crate::scripts::{FENCE, LEASES, Lua, Part, WAITING};

/// A reader's acquire: in unless a writer holds the lock or waits for it
/// (`read_acquire.lua`).
pub(crate) static READ_ACQUIRE: Lua = Lua::new(
    "backend/sync/read_acquire.lua",
    &[LEASES],
    include_str!("read_acquire.lua"),
);

/// A writer's acquire: in when no other writer holds the lock and no live
/// reader is left, else it waits in the writers' set
/// (`write_acquire.lua`).
pub(crate) static WRITE_ACQUIRE: Lua = Lua::new(
    "backend/sync/write_acquire.lua",
    &[FENCE, LEASES],
    include_str!("write_acquire.lua"),
);

/// A writer's release or give-back, waking every waiter
/// (`write_release.lua`).
pub(crate) static WRITE_RELEASE: Lua = Lua::new(
    "backend/sync/write_release.lua",
    &[Part::Publish],
    include_str!("write_release.lua"),
);

/// A reader's release or give-back, waking the waiting writers
/// (`read_release.lua`).
pub(crate) static READ_RELEASE: Lua = Lua::new(
    "backend/sync/read_release.lua",
    &[Part::Publish, LEASES],
    include_str!("read_release.lua"),
);

/// A write lock becomes a read lock in one step
/// (`downgrade.lua`).
pub(crate) static DOWNGRADE: Lua = Lua::new(
    "backend/sync/downgrade.lua",
    &[Part::Publish, LEASES],
    include_str!("downgrade.lua"),
);

/// Resets one lease in a sorted set (a reader's, a semaphore holder's)
/// (`lease_renew.lua`).
pub(crate) static LEASE_RENEW: Lua = Lua::new(
    "backend/sync/lease_renew.lua",
    &[LEASES],
    include_str!("lease_renew.lua"),
);

/// Takes `n` permits of a semaphore if that many are free
/// (`permits_acquire.lua`).
pub(crate) static PERMITS_ACQUIRE: Lua = Lua::new(
    "backend/sync/permits_acquire.lua",
    &[LEASES],
    include_str!("permits_acquire.lua"),
);

/// Gives a holder's permits back, once
/// (`permits_release.lua`).
pub(crate) static PERMITS_RELEASE: Lua = Lua::new(
    "backend/sync/permits_release.lua",
    &[Part::Publish, LEASES],
    include_str!("permits_release.lua"),
);

/// How many permits of a semaphore are free; reads only
/// (`permits_available.lua`).
pub(crate) static PERMITS_AVAILABLE: Lua = Lua::new(
    "backend/sync/permits_available.lua",
    &[LEASES],
    include_str!("permits_available.lua"),
);

/// Sets a latch's count, only if it is not set up
/// (`latch_set.lua`).
pub(crate) static LATCH_SET: Lua = Lua::new(
    "backend/sync/latch_set.lua",
    &[Part::Publish],
    include_str!("latch_set.lua"),
);

/// Counts a latch down once per request id
/// (`latch_count_down.lua`).
pub(crate) static LATCH_COUNT_DOWN: Lua = Lua::new(
    "backend/sync/latch_count_down.lua",
    &[Part::Publish],
    include_str!("latch_count_down.lua"),
);

/// A latch's count and the ttl left; reads only
/// (`latch_read.lua`).
pub(crate) static LATCH_READ: Lua = Lua::new(
    "backend/sync/latch_read.lua",
    &[],
    include_str!("latch_read.lua"),
);

/// Takes every lock of a group whose keys share one hash tag, or none
/// (`group_acquire.lua`).
pub(crate) static GROUP_ACQUIRE: Lua = Lua::new(
    "backend/sync/group_acquire.lua",
    &[WAITING, FENCE],
    include_str!("group_acquire.lua"),
);

/// The synchronizers' scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 13] = [
    &READ_ACQUIRE,
    &WRITE_ACQUIRE,
    &WRITE_RELEASE,
    &READ_RELEASE,
    &DOWNGRADE,
    &LEASE_RENEW,
    &PERMITS_ACQUIRE,
    &PERMITS_RELEASE,
    &PERMITS_AVAILABLE,
    &LATCH_SET,
    &LATCH_COUNT_DOWN,
    &LATCH_READ,
    &GROUP_ACQUIRE,
];
