//! The Lua scripts: each state transition of a record is one of them, and
//! every one but `CLAIM` acts only for the record's owner token.
//!
//! A record is a hash at `KEYS[1]`:
//! - `st`: `p` (in progress), `c` (completed, replayable) or `n` (completed,
//!   too large to replay);
//! - `own`: the owner token (while in progress only), `fen`: the fencing
//!   token, `fp`: the request fingerprint;
//! - once completed, `code`, `hdr` (allow-listed headers, `name:value\n`)
//!   and `body`.
//!
//! The key's expiry is the lease while in progress and the retention once
//! completed. The fencing counter lives beside it (`KEYS[2]`, same hash
//! tag) so that tokens keep increasing across claims of one key.
//!
//! Completing and releasing publish on the channel named like the record,
//! which wakes duplicates waiting for the result.

use std::sync::LazyLock;

use redlock_runtime::bb8_redis::redis::Script;

/// absent -> in progress. `ARGV` owner, lease (ms), fingerprint, fence
/// counter ttl (ms). Returns `{'claimed', fence}`, `{'mismatch'}`,
/// `{'processing', pttl}` or `{state, code, hdr, body}`.
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{}{}",
        redlock_runtime::__private::NEXT_FENCE_LUA,
        r"
local rec = redis.call('HMGET', KEYS[1], 'st', 'fp')
if not rec[1] then
  local fence = string.format('%.0f', next_fence(KEYS[2], ARGV[4], redis.call('TIME')))
  redis.call('HSET', KEYS[1], 'st', 'p', 'own', ARGV[1], 'fen', fence, 'fp', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'claimed', fence}
end
if rec[2] ~= ARGV[3] then return {'mismatch'} end
if rec[1] == 'p' then return {'processing', tostring(redis.call('PTTL', KEYS[1]))} end
local done = redis.call('HMGET', KEYS[1], 'code', 'hdr', 'body')
return {rec[1], done[1] or '', done[2] or '', done[3] or ''}
",
    ))
});

/// Resets the lease while the owner holds the record. `ARGV` owner, lease
/// (ms). Returns 1 or 0.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
",
    )
});

/// in progress -> completed, for the owner only. `ARGV` owner, state (`c`
/// or `n`), status code, headers, body, retention (ms). Returns 1 or 0.
pub(crate) static COMPLETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'st', ARGV[2], 'code', ARGV[3], 'hdr', ARGV[4], 'body', ARGV[5])
redis.call('HDEL', KEYS[1], 'own')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PUBLISH', KEYS[1], '')
return 1
",
    )
});

/// in progress -> absent, for the owner only. `ARGV` owner. Returns 1 or 0.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1], '')
return 1
",
    )
});
