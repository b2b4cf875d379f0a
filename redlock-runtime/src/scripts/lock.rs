//! The plain lock's scripts (`lock/`): take it with its fencing token,
//! issue a token for a lock taken without one, renew, release, and the
//! release of a lock held for a minimum time.

use super::{ACQUIRE_LOCK, FENCE, Lua, Part, RELEASE_LOCK, WAITING};

/// Takes the lock and issues its fencing token in one step
/// (`lock/acquire.lua`).
pub(crate) static ACQUIRE: Lua = Lua::new(
    "scripts/lock/acquire.lua",
    &[WAITING, FENCE, ACQUIRE_LOCK],
    include_str!("lock/acquire.lua"),
);

/// Issues the fencing token of a lock taken by a plain `SET NX`, if the
/// token still holds it (`lock/issue_fence.lua`).
pub(crate) static ISSUE_FENCE: Lua = Lua::new(
    "scripts/lock/issue_fence.lua",
    &[FENCE],
    include_str!("lock/issue_fence.lua"),
);

/// Resets the lease if the token still holds the lock (`lock/extend.lua`).
pub(crate) static EXTEND: Lua = Lua::new(
    "scripts/lock/extend.lua",
    &[],
    include_str!("lock/extend.lua"),
);

/// Deletes the lock if the token still holds it, waking its waiters
/// (`lock/release.lua`).
pub(crate) static RELEASE: Lua = Lua::new(
    "scripts/lock/release.lua",
    &[Part::Publish, RELEASE_LOCK],
    include_str!("lock/release.lua"),
);

/// Ends a lock that must be held for a minimum time
/// (`lock/release_after_hold.lua`).
pub(crate) static RELEASE_AFTER_HOLD: Lua = Lua::new(
    "scripts/lock/release_after_hold.lua",
    &[Part::Publish],
    include_str!("lock/release_after_hold.lua"),
);
