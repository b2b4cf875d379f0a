//! The multi-lock's group acquire (`acquire.lua`): every lock of a group
//! whose keys share one hash tag, or none. Safe to send twice: a repeated
//! acquire finds its own token on every key and keeps them.

use crate::scripts::{FENCE, Lua, WAITING};

/// Takes every lock of a group whose keys share one hash tag, or none
/// (`acquire.lua`).
pub(crate) static GROUP_ACQUIRE: Lua = Lua::new(
    "primitive/group/acquire.lua",
    &[WAITING, FENCE],
    include_str!("acquire.lua"),
);

/// This primitive's scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 1] = [&GROUP_ACQUIRE];
