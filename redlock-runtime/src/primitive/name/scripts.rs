//! The operator's scripts on a name (the `.lua` files beside this one):
//! one reads everything kept under it, one ends whatever holds it.

use crate::scripts::{FENCE, Lua, Part};

/// Everything under one name, leases that ran out left out; reads only
/// (`inspect.lua`).
pub(crate) static INSPECT: Lua = Lua::new(
    "primitive/name/inspect.lua",
    &[],
    include_str!("inspect.lua"),
);

/// Ends the lock and the read/write lock of one name, whoever holds them,
/// and raises their fencing counters (`force_release.lua`).
pub(crate) static FORCE_RELEASE: Lua = Lua::new(
    "primitive/name/force_release.lua",
    &[Part::Publish, FENCE],
    include_str!("force_release.lua"),
);

/// The operator's scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 2] = [&INSPECT, &FORCE_RELEASE];
