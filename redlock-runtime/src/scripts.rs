//! The Lua scripts that make each lock transition one atomic step on Redis.

use std::sync::LazyLock;

use redis::Script;

/// Takes the lock and bumps the fencing counter in one step.
///
/// `KEYS[1]` lock, `KEYS[2]` fencing counter; `ARGV[1]` token, `ARGV[2]` ttl (ms).
/// Returns `{1, fence}` when the lock is ours, `{0, pttl}` when another owner
/// holds it. When the lock already holds `ARGV[1]` (an earlier attempt of
/// this same acquire got through but its answer was lost) the lease is reset
/// and the fence of that attempt returned, so a retried acquire never locks
/// itself out.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return {0, redis.call('PTTL', KEYS[1])}
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

/// Deletes the lock if the token still holds it; never touches another
/// owner's lock.
///
/// `KEYS[1]` lock; `ARGV[1]` token. Returns 1 or 0.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
",
    )
});
