//! A lock's scripts (the `.lua` files beside this one), and the two steps
//! they share: `acquire_lock` (take the lock, issue its fencing token)
//! and `release_lock` (delete it if the token still holds it, waking the
//! waiters), each one function that a single call's script and the batch
//! of coalesced calls (`batch.lua`) both run.

use crate::scripts::{FENCE, Lua, Part, WAITING};

/// `acquire_lock`: the lock's acquire step (after [`WAITING`] and [`FENCE`]).
pub(crate) const ACQUIRE_LOCK: Part = Part::Lua(include_str!("acquire_lock.lua"));
/// `release_lock`: the lock's release step (after [`Part::Publish`]).
pub(crate) const RELEASE_LOCK: Part = Part::Lua(include_str!("release_lock.lua"));

/// An acquire that issues a fencing token (`acquire.lua`).
pub(crate) static ACQUIRE: Lua = Lua::new(
    "primitive/lock/acquire.lua",
    &[WAITING, FENCE, ACQUIRE_LOCK],
    include_str!("acquire.lua"),
);

/// A plain lock's fencing token, issued on first ask (`issue_fence.lua`).
pub(crate) static ISSUE_FENCE: Lua = Lua::new(
    "primitive/lock/issue_fence.lua",
    &[FENCE],
    include_str!("issue_fence.lua"),
);

/// A holder's renewal (`extend.lua`).
pub(crate) static EXTEND: Lua =
    Lua::new("primitive/lock/extend.lua", &[], include_str!("extend.lua"));

/// A holder's release, waking the waiters (`release.lua`).
pub(crate) static RELEASE: Lua = Lua::new(
    "primitive/lock/release.lua",
    &[Part::Publish, RELEASE_LOCK],
    include_str!("release.lua"),
);

/// The release of a lock held for a minimum time: the lock deleted, or
/// its lease shortened to what is left of the minimum
/// (`release_after_hold.lua`).
pub(crate) static RELEASE_AFTER_HOLD: Lua = Lua::new(
    "primitive/lock/release_after_hold.lua",
    &[Part::Publish],
    include_str!("release_after_hold.lua"),
);

/// Several fenced acquires and releases of one server in one call, each
/// through the step its own script runs (`batch.lua`): the batch step the
/// coalescer of `store/server/` sends (see `call.rs`).
pub(crate) static BATCH: Lua = Lua::new(
    "primitive/lock/batch.lua",
    &[Part::Publish, WAITING, FENCE, ACQUIRE_LOCK, RELEASE_LOCK],
    include_str!("batch.lua"),
);

/// Every script of a lock (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 6] = [
    &ACQUIRE,
    &BATCH,
    &ISSUE_FENCE,
    &EXTEND,
    &RELEASE,
    &RELEASE_AFTER_HOLD,
];
