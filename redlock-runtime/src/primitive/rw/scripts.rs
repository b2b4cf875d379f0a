//! The read/write lock's scripts (the `.lua` files beside this one). A
//! reader's lease lives in a sorted set (token -> lease deadline, ms on
//! Redis's clock), as does a waiting writer's presence; every acquire
//! first drops the members whose deadline passed, so a dead holder frees
//! its share within its ttl. Each takes all its keys in `KEYS` (one hash
//! tag), reads the time from Redis's `TIME` only, and is safe to send
//! twice: a repeated acquire finds its own token and keeps it, a repeated
//! release finds nothing left to do.

use crate::scripts::{FENCE, LEASES, Lua, Part};

/// A reader's acquire: in unless a writer holds the lock or waits for it
/// (`read_acquire.lua`).
pub(crate) static READ_ACQUIRE: Lua = Lua::new(
    "primitive/rw/read_acquire.lua",
    &[LEASES],
    include_str!("read_acquire.lua"),
);

/// A writer's acquire: in when no other writer holds the lock and no live
/// reader is left, else it waits in the writers' set
/// (`write_acquire.lua`).
pub(crate) static WRITE_ACQUIRE: Lua = Lua::new(
    "primitive/rw/write_acquire.lua",
    &[FENCE, LEASES],
    include_str!("write_acquire.lua"),
);

/// A writer's release or give-back, waking every waiter
/// (`write_release.lua`).
pub(crate) static WRITE_RELEASE: Lua = Lua::new(
    "primitive/rw/write_release.lua",
    &[Part::Publish],
    include_str!("write_release.lua"),
);

/// A reader's release or give-back, waking the waiting writers
/// (`read_release.lua`).
pub(crate) static READ_RELEASE: Lua = Lua::new(
    "primitive/rw/read_release.lua",
    &[Part::Publish, LEASES],
    include_str!("read_release.lua"),
);

/// A write lock becomes a read lock in one step
/// (`downgrade.lua`).
pub(crate) static DOWNGRADE: Lua = Lua::new(
    "primitive/rw/downgrade.lua",
    &[Part::Publish, LEASES],
    include_str!("downgrade.lua"),
);

/// This primitive's scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 5] = [
    &READ_ACQUIRE,
    &WRITE_ACQUIRE,
    &WRITE_RELEASE,
    &READ_RELEASE,
    &DOWNGRADE,
];
