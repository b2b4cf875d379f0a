//! The countdown latch's scripts (the `.lua` files beside this one): a
//! count-down is counted once per request id, so one sent twice (its
//! answer lost) counts once.

use crate::scripts::{Lua, Part};

/// Sets a latch's count, only if it is not set up
/// (`set.lua`).
pub(crate) static LATCH_SET: Lua = Lua::new(
    "primitive/latch/set.lua",
    &[Part::Publish],
    include_str!("set.lua"),
);

/// Counts a latch down once per request id
/// (`count_down.lua`).
pub(crate) static LATCH_COUNT_DOWN: Lua = Lua::new(
    "primitive/latch/count_down.lua",
    &[Part::Publish],
    include_str!("count_down.lua"),
);

/// A latch's count and the ttl left; reads only
/// (`read.lua`).
pub(crate) static LATCH_READ: Lua =
    Lua::new("primitive/latch/read.lua", &[], include_str!("read.lua"));

/// This primitive's scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 3] = [&LATCH_SET, &LATCH_COUNT_DOWN, &LATCH_READ];
