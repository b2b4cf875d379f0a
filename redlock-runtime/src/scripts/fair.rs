//! Fair mode's scripts (`fair/`): the line of waiters beside a lock (a list
//! of tokens in arrival order, and each waiter's presence deadline in a
//! sorted set), the fair acquire, the release that hands the lock to the
//! first live waiter (a grant), and the give-back of a waiter that leaves.

use super::{FAIR_LINE, FENCE, HAND_OVER, Lua, Part};

/// Fair acquire: the lock goes to the first live waiter in arrival order
/// (`fair/acquire.lua`).
pub(crate) static FAIR_ACQUIRE: Lua = Lua::new(
    "scripts/fair/acquire.lua",
    &[FAIR_LINE, FENCE],
    include_str!("fair/acquire.lua"),
);

/// Fair release: hands the lock straight to the first live waiter in line,
/// if there is one, else deletes it (`fair/release.lua`).
pub(crate) static FAIR_RELEASE: Lua = Lua::new(
    "scripts/fair/release.lua",
    &[Part::Publish, FAIR_LINE, FENCE, HAND_OVER],
    include_str!("fair/release.lua"),
);

/// A fair waiter gives up: it leaves the line, and a lock it holds goes on
/// to the next waiter (`fair/leave.lua`).
pub(crate) static FAIR_LEAVE: Lua = Lua::new(
    "scripts/fair/leave.lua",
    &[Part::Publish, FAIR_LINE, FENCE, HAND_OVER],
    include_str!("fair/leave.lua"),
);
