//! The semaphore's scripts (the `.lua` files beside this one). Its
//! holders' leases live in a sorted set (token -> lease deadline, ms on
//! Redis's clock), their permit counts in a hash; every acquire first
//! drops the holders whose deadline passed, so a dead holder frees its
//! permits within its ttl, and both keys expire no earlier than the
//! longest lease. Each is safe to send twice.

use crate::scripts::{LEASES, Lua, Part};

/// Takes `n` permits of a semaphore if that many are free
/// (`acquire.lua`).
pub(crate) static PERMITS_ACQUIRE: Lua = Lua::new(
    "primitive/semaphore/acquire.lua",
    &[LEASES],
    include_str!("acquire.lua"),
);

/// Gives a holder's permits back, once
/// (`release.lua`).
pub(crate) static PERMITS_RELEASE: Lua = Lua::new(
    "primitive/semaphore/release.lua",
    &[Part::Publish, LEASES],
    include_str!("release.lua"),
);

/// How many permits of a semaphore are free; reads only
/// (`available.lua`).
pub(crate) static PERMITS_AVAILABLE: Lua = Lua::new(
    "primitive/semaphore/available.lua",
    &[LEASES],
    include_str!("available.lua"),
);

/// This primitive's scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 3] = [&PERMITS_ACQUIRE, &PERMITS_RELEASE, &PERMITS_AVAILABLE];
