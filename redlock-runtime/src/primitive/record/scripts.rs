//! The idempotency records' scripts (the `.lua` files beside this one), under the public
//! `records` module and the `redlock-axum` layer. A record is a hash at
//! `KEYS[1]`:
//! - `st`: `p` (in progress), `c` (completed, replayable) or `n`
//!   (completed, too large to replay);
//! - `own`: the owner token (while in progress only), `fen`: the fencing
//!   token, `fp`: the request fingerprint;
//! - once completed, `code`, `hdr` (the stored headers), `body`, and `by`:
//!   the owner token that completed it (see `complete.lua`).
//!
//! Its expiry is the lease while in progress and the retention once
//! completed; the fencing counter lives beside it (`KEYS[2]`, same hash
//! tag). Completing and releasing publish on the channel named like the
//! record, which wakes duplicates waiting for the result.

use crate::scripts::{FENCE, Lua, Part};

/// absent -> in progress, or what is there (`claim.lua`).
pub(crate) static RECORD_CLAIM: Lua = Lua::new(
    "primitive/record/claim.lua",
    &[FENCE],
    include_str!("claim.lua"),
);

/// Resets the lease while the owner holds the record
/// (`renew.lua`).
pub(crate) static RECORD_RENEW: Lua =
    Lua::new("primitive/record/renew.lua", &[], include_str!("renew.lua"));

/// in progress -> completed, for the owner only (`complete.lua`).
pub(crate) static RECORD_COMPLETE: Lua = Lua::new(
    "primitive/record/complete.lua",
    &[Part::Publish],
    include_str!("complete.lua"),
);

/// in progress -> absent, for the owner only (`release.lua`).
pub(crate) static RECORD_RELEASE: Lua = Lua::new(
    "primitive/record/release.lua",
    &[Part::Publish],
    include_str!("release.lua"),
);

/// The record's scripts (for the checks every script passes).
#[cfg(test)]
pub(crate) const SCRIPTS: [&Lua; 4] = [
    &RECORD_CLAIM,
    &RECORD_RENEW,
    &RECORD_COMPLETE,
    &RECORD_RELEASE,
];
