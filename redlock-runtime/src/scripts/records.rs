//! The idempotency records' scripts (`records/`), under the public
//! `records` module and the `redlock-axum` layer. A record is a hash at
//! `KEYS[1]`:
//! - `st`: `p` (in progress), `c` (completed, replayable) or `n`
//!   (completed, too large to replay);
//! - `own`: the owner token (while in progress only), `fen`: the fencing
//!   token, `fp`: the request fingerprint;
//! - once completed, `code`, `hdr` (the stored headers), `body`, and `by`:
//!   the owner token that completed it (see `records/complete.lua`).
//!
//! Its expiry is the lease while in progress and the retention once
//! completed; the fencing counter lives beside it (`KEYS[2]`, same hash
//! tag). Completing and releasing publish on the channel named like the
//! record, which wakes duplicates waiting for the result.

use super::{FENCE, Lua, Part};

/// absent -> in progress, or what is there (`records/claim.lua`).
pub(crate) static RECORD_CLAIM: Lua = Lua::new(&[FENCE], include_str!("records/claim.lua"));

/// Resets the lease while the owner holds the record
/// (`records/renew.lua`).
pub(crate) static RECORD_RENEW: Lua = Lua::new(&[], include_str!("records/renew.lua"));

/// in progress -> completed, for the owner only (`records/complete.lua`).
pub(crate) static RECORD_COMPLETE: Lua =
    Lua::new(&[Part::Publish], include_str!("records/complete.lua"));

/// in progress -> absent, for the owner only (`records/release.lua`).
pub(crate) static RECORD_RELEASE: Lua =
    Lua::new(&[Part::Publish], include_str!("records/release.lua"));
