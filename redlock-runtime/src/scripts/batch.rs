//! The batch of coalesced lock calls: several acquires and releases, of
//! as many locks, in one script call (see `store/server/coalesce.rs`).

use super::{ACQUIRE_LOCK, FENCE, Lua, Part, RELEASE_LOCK, WAITING};

/// Runs several one-lock calls in order, each through the very step its
/// own script runs, and answers each as its own script would
/// (`lock/batch.lua`).
pub(crate) static BATCH: Lua = Lua::new(
    "scripts/lock/batch.lua",
    &[Part::Publish, WAITING, FENCE, ACQUIRE_LOCK, RELEASE_LOCK],
    include_str!("lock/batch.lua"),
);
