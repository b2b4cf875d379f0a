//! The Lua scripts that make each lock transition one atomic step on Redis.

use std::sync::LazyLock;

use redis::Script;

/// Takes the lock and bumps the fencing counter in one step.
///
/// `KEYS[1]` lock, `KEYS[2]` fencing counter; `ARGV[1]` token, `ARGV[2]` ttl
/// (ms), `ARGV[3]` `1` to also return Redis's clock (ms).
/// Returns `{1, fence}` (or `{1, fence, now_ms}`) when the lock is ours,
/// `{0, pttl}` when another owner holds it. When the lock already holds
/// `ARGV[1]` (an earlier attempt of this same acquire got through but its
/// answer was lost) the lease is reset and the fence of that attempt
/// returned, so a retried acquire never locks itself out.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local fence
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  fence = redis.call('INCR', KEYS[2])
elseif redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  fence = tonumber(redis.call('GET', KEYS[2]) or '0')
else
  return {0, redis.call('PTTL', KEYS[1])}
end
if ARGV[3] == '1' then
  local t = redis.call('TIME')
  return {1, fence, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
end
return {1, fence}
",
    )
});

/// Resets the lease if the token still holds the lock.
///
/// `KEYS[1]` lock; `ARGV[1]` token, `ARGV[2]` ttl (ms). Returns 1 or 0.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
",
    )
});

/// Deletes the lock if the token still holds it, and publishes on the
/// channel named like the lock key, which wakes the waiters; never touches
/// another owner's lock.
///
/// `KEYS[1]` lock; `ARGV[1]` token. Returns 1 or 0.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1], '')
  return 1
end
return 0
",
    )
});

/// Ends a lock that must be held for a minimum time (ShedLock's
/// `lockAtLeastFor`), measured on Redis's clock: if the minimum is not over,
/// shortens the lease to what is left of it; else deletes the lock.
///
/// `KEYS[1]` lock; `ARGV[1]` token, `ARGV[2]` acquire time on Redis's clock
/// (ms), `ARGV[3]` minimum hold (ms). Returns 0 (not the owner), 1 (deleted)
/// or 2 (left to expire when the minimum hold ends).
pub(crate) static RELEASE_AFTER_HOLD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(ARGV[2]) + tonumber(ARGV[3]) - now
if left > 0 then
  redis.call('PEXPIRE', KEYS[1], left)
  return 2
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[1], '')
return 1
",
    )
});
