//! The scripts of the synchronizers (`sync/`): the read/write lock, the semaphore,
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

use super::{FENCE, LEASES, Lua, Part, WAITING};

/// A reader's acquire: in unless a writer holds the lock or waits for it
/// (`sync/read_acquire.lua`).
pub(crate) static READ_ACQUIRE: Lua = Lua::new(
    "scripts/sync/read_acquire.lua",
    &[LEASES],
    include_str!("sync/read_acquire.lua"),
);

/// A writer's acquire: in when no other writer holds the lock and no live
/// reader is left, else it waits in the writers' set
/// (`sync/write_acquire.lua`).
pub(crate) static WRITE_ACQUIRE: Lua = Lua::new(
    "scripts/sync/write_acquire.lua",
    &[FENCE, LEASES],
    include_str!("sync/write_acquire.lua"),
);

/// A writer's release or give-back, waking every waiter
/// (`sync/write_release.lua`).
pub(crate) static WRITE_RELEASE: Lua = Lua::new(
    "scripts/sync/write_release.lua",
    &[Part::Publish],
    include_str!("sync/write_release.lua"),
);

/// A reader's release or give-back, waking the waiting writers
/// (`sync/read_release.lua`).
pub(crate) static READ_RELEASE: Lua = Lua::new(
    "scripts/sync/read_release.lua",
    &[Part::Publish, LEASES],
    include_str!("sync/read_release.lua"),
);

/// A write lock becomes a read lock in one step
/// (`sync/downgrade.lua`).
pub(crate) static DOWNGRADE: Lua = Lua::new(
    "scripts/sync/downgrade.lua",
    &[Part::Publish, LEASES],
    include_str!("sync/downgrade.lua"),
);

/// Resets one lease in a sorted set (a reader's, a semaphore holder's)
/// (`sync/lease_renew.lua`).
pub(crate) static LEASE_RENEW: Lua = Lua::new(
    "scripts/sync/lease_renew.lua",
    &[LEASES],
    include_str!("sync/lease_renew.lua"),
);

/// Takes `n` permits of a semaphore if that many are free
/// (`sync/permits_acquire.lua`).
pub(crate) static PERMITS_ACQUIRE: Lua = Lua::new(
    "scripts/sync/permits_acquire.lua",
    &[LEASES],
    include_str!("sync/permits_acquire.lua"),
);

/// Gives a holder's permits back, once
/// (`sync/permits_release.lua`).
pub(crate) static PERMITS_RELEASE: Lua = Lua::new(
    "scripts/sync/permits_release.lua",
    &[Part::Publish, LEASES],
    include_str!("sync/permits_release.lua"),
);

/// How many permits of a semaphore are free; reads only
/// (`sync/permits_available.lua`).
pub(crate) static PERMITS_AVAILABLE: Lua = Lua::new(
    "scripts/sync/permits_available.lua",
    &[LEASES],
    include_str!("sync/permits_available.lua"),
);

/// Sets a latch's count, only if it is not set up
/// (`sync/latch_set.lua`).
pub(crate) static LATCH_SET: Lua = Lua::new(
    "scripts/sync/latch_set.lua",
    &[Part::Publish],
    include_str!("sync/latch_set.lua"),
);

/// Counts a latch down once per request id
/// (`sync/latch_count_down.lua`).
pub(crate) static LATCH_COUNT_DOWN: Lua = Lua::new(
    "scripts/sync/latch_count_down.lua",
    &[Part::Publish],
    include_str!("sync/latch_count_down.lua"),
);

/// A latch's count and the ttl left; reads only
/// (`sync/latch_read.lua`).
pub(crate) static LATCH_READ: Lua = Lua::new(
    "scripts/sync/latch_read.lua",
    &[],
    include_str!("sync/latch_read.lua"),
);

/// Takes every lock of a group whose keys share one hash tag, or none
/// (`sync/group_acquire.lua`).
pub(crate) static GROUP_ACQUIRE: Lua = Lua::new(
    "scripts/sync/group_acquire.lua",
    &[WAITING, FENCE],
    include_str!("sync/group_acquire.lua"),
);
