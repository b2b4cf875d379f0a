//! The operator's break-glass: the script that ends whatever lease is on a
//! lock's name, for [`LockClient::force_release`](crate::LockClient::force_release).

use super::{FENCE, Lua, Part};

/// Ends the lock and the read/write lock of one name, whoever holds them,
/// and raises their fencing counters (`force_release.lua`).
pub(crate) static FORCE_RELEASE: Lua = Lua::new(
    "scripts/force_release.lua",
    &[Part::Publish, FENCE],
    include_str!("force_release.lua"),
);
