//! Fair mode's scripts (the `.lua` files beside this one): the line of waiters beside a lock (a list
//! of tokens in arrival order, and each waiter's presence deadline in a
//! sorted set), the fair acquire, the release that hands the lock to the
//! first live waiter (a grant), and the give-back of a waiter that leaves.

use crate::scripts::{FAIR_LINE, FENCE, HAND_OVER, Lua, Part};

/// Fair acquire: the lock goes to the first live waiter in arrival order
/// (`acquire.lua`).
pub(crate) static FAIR_ACQUIRE: Lua = Lua::new(
    "primitive/fair/acquire.lua",
    &[FAIR_LINE, FENCE],
    include_str!("acquire.lua"),
);

/// Fair release: hands the lock straight to the first live waiter in line,
/// if there is one, else deletes it (`release.lua`).
pub(crate) static FAIR_RELEASE: Lua = Lua::new(
    "primitive/fair/release.lua",
    &[Part::Publish, FAIR_LINE, FENCE, HAND_OVER],
    include_str!("release.lua"),
);

/// A fair waiter gives up: it leaves the line, and a lock it holds goes on
/// to the next waiter (`leave.lua`).
pub(crate) static FAIR_LEAVE: Lua = Lua::new(
    "primitive/fair/leave.lua",
    &[Part::Publish, FAIR_LINE, FENCE, HAND_OVER],
    include_str!("leave.lua"),
);

/// Fair mode's scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 3] = [&FAIR_ACQUIRE, &FAIR_RELEASE, &FAIR_LEAVE];
