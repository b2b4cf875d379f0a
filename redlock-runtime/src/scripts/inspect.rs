//! The script that reads everything kept under one name, for
//! [`LockClient::inspect`](crate::LockClient::inspect). It reads only.

use super::Lua;

/// Everything under one name, leases that ran out left out
/// (`inspect.lua`).
pub(crate) static INSPECT: Lua = Lua::new("scripts/inspect.lua", &[], include_str!("inspect.lua"));
