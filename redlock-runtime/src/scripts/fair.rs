//! Fair mode's scripts: the line of waiters beside a lock (a list of
//! tokens in arrival order, and each waiter's presence deadline in a
//! sorted set), the fair acquire, the release that hands the lock to the
//! first live waiter (a grant), and the give-back of a waiter that leaves.

use super::{HELD, Lua, NEXT_FENCE};

/// Shared Lua for the fair scripts: Redis's clock in ms, and dropping the
/// waiters at the head of the queue whose presence ran out.
const FAIR_PRELUDE: &str = r"
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function purge(queue, waiters, now)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then return nil end
    local until_ms = redis.call('ZSCORE', waiters, head)
    if until_ms and tonumber(until_ms) > now then return head end
    redis.call('LPOP', queue)
    redis.call('ZREM', waiters, head)
  end
end
";

/// Fair acquire: the lock goes to the first live waiter in arrival order.
///
/// `KEYS` lock, fence, queue (list of waiter tokens), waiters (zset: token
/// -> presence deadline, ms on Redis's clock); `ARGV[1]` token, `ARGV[2]`
/// ttl (ms), `ARGV[3]` presence (ms): how long this waiter keeps its place
/// without asking again, `ARGV[4]` `1` to return Redis's clock, `ARGV[5]`
/// the fencing counter's retention (ms).
/// Returns as [`ACQUIRE`](super::ACQUIRE) (with pttl -3: free, but another
/// waiter is first).
/// It does not mark a busy lock (see [`HELD`]): a fair waiter is woken by
/// the fair release that names it, and a plain release (of the same key
/// taken unfairly) wakes plain waiters only, so a fair waiter behind it
/// polls, as before; its holder check accepts a mark a plain waiter left.
///
/// The hand-off path (the lock is free and the caller is first in line, or
/// no one waits) reads no clock and purges nothing.
pub(crate) static FAIR_ACQUIRE: Lua =
    Lua::new(&[HELD, FAIR_PRELUDE, NEXT_FENCE, FAIR_ACQUIRE_BODY]);
const FAIR_ACQUIRE_BODY: &str = r"
local holder = redis.call('GET', KEYS[1])
local fence
if held(holder, ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  fence = tonumber(redis.call('GET', KEYS[2]) or '0')
else
  local first = false
  if not holder then
    local head = redis.call('LINDEX', KEYS[3], 0)
    if head == ARGV[1] then
      redis.call('LPOP', KEYS[3])
      redis.call('ZREM', KEYS[4], ARGV[1])
      first = true
    elseif not head then
      first = true
    end
  end
  if not first then
    local now = clock()
    local head = purge(KEYS[3], KEYS[4], now)
    if holder or (head and head ~= ARGV[1]) then
      if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then
        redis.call('RPUSH', KEYS[3], ARGV[1])
      end
      local presence = tonumber(ARGV[3])
      redis.call('ZADD', KEYS[4], now + presence, ARGV[1])
      redis.call('PEXPIRE', KEYS[3], presence * 2)
      redis.call('PEXPIRE', KEYS[4], presence * 2)
      if holder then return {0, redis.call('PTTL', KEYS[1])} end
      return {0, -3}
    end
    if head then
      redis.call('LPOP', KEYS[3])
      redis.call('ZREM', KEYS[4], ARGV[1])
    end
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  fence = next_fence(KEYS[2], ARGV[5], redis.call('TIME'))
end
if ARGV[4] == '1' then return {1, fence, clock()} end
return {1, fence}
";

/// Fair release: hands the lock straight to the first live waiter in line,
/// if there is one, else deletes it; either way only if the token holds it.
///
/// The hand-off (a grant) sets the lock to the waiter's token for what is
/// left of the waiter's presence, takes it out of the line, issues the
/// fencing token, and publishes `id ␟ fence ␟ now` (`id` the waiter's
/// name on the channel, `redis.sha1hex` of its token: never the token,
/// which would let anyone allowed to subscribe release or extend the lock
/// it names, see `waiter_id` in `wakeups.rs`; `␟` the waiter
/// mark, byte 31, never in an id; `now` Redis's clock in ms). The waiter
/// holds the lock from the message on, without asking again: one round
/// trip less between two holders. Its watchdog then renews the lease to
/// its ttl at once. A waiter that does not take the message (it polls, or
/// it waits through replicas and must have the write acknowledged) finds
/// the lock its own at its next ask ([`FAIR_ACQUIRE`]'s holder path); one
/// that gave up or was cancelled gives it back (its give-back,
/// [`FAIR_LEAVE`], grants the next waiter); one that died
/// holds it until its presence would have run out, as long as a dead
/// waiter blocked the line before. With no live waiter the release
/// deletes the lock and publishes an empty message (waking a waiter of the
/// key that does not queue).
///
/// Tokens of one key still increase in the order of tenure: the grant
/// issues the next token from the key's counter while the lock is held by
/// no one else, exactly as an acquire does.
///
/// `KEYS` lock, queue, waiters, fence; `ARGV[1]` token, `ARGV[2]` the
/// fencing counter's retention (ms). Returns 1 or 0.
pub(crate) static FAIR_RELEASE: Lua = Lua::new(&[
    HELD,
    FAIR_PRELUDE,
    NEXT_FENCE,
    FAIR_HAND_OVER,
    FAIR_RELEASE_BODY,
]);
const FAIR_RELEASE_BODY: &str = r"
if not held(redis.call('GET', KEYS[1]), ARGV[1]) then return 0 end
hand_over(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2])
return 1
";

/// Lua: `hand_over(key, queue, waiters, counter, retention)` (after
/// [`FAIR_PRELUDE`] and [`NEXT_FENCE`]): the lock `key`, which its holder
/// gives up, goes to the first live waiter in line (a grant, see
/// [`FAIR_RELEASE`]); with no live waiter it is deleted.
const FAIR_HAND_OVER: &str = r"
local function hand_over(key, queue, waiters, counter, retention)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local head = purge(queue, waiters, now)
  if not head then
    redis.call('DEL', key)
    redis.call('PUBLISH', key, '')
    return
  end
  local lease = tonumber(redis.call('ZSCORE', waiters, head)) - now
  redis.call('LPOP', queue)
  redis.call('ZREM', waiters, head)
  redis.call('SET', key, head, 'PX', lease)
  local fence = next_fence(counter, retention, t)
  redis.call('PUBLISH', key, string.format('%s\31%.0f\31%.0f', redis.sha1hex(head), fence, now))
end
";

/// A fair waiter gives up (its wait ran out, it was cancelled, an answer
/// was lost): its give-back, in one step. It leaves the line; if it holds
/// the lock (an attempt whose answer it never saw took it, or a release
/// granted it, see [`FAIR_RELEASE`]), the lock goes on to the next waiter
/// as its release would; if the lock is free, the next waiter is woken
/// (the message is its id, as in a grant: never its token).
/// One script, so no grant can land between the give-back's release and
/// its leave.
///
/// `KEYS` lock, queue, waiters, fence; `ARGV[1]` token, `ARGV[2]` the
/// fencing counter's retention (ms). Returns 1 when it held the lock, else
/// 0.
pub(crate) static FAIR_LEAVE: Lua = Lua::new(&[
    HELD,
    FAIR_PRELUDE,
    NEXT_FENCE,
    FAIR_HAND_OVER,
    FAIR_LEAVE_BODY,
]);
const FAIR_LEAVE_BODY: &str = r"
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local v = redis.call('GET', KEYS[1])
if not v then
  local head = purge(KEYS[2], KEYS[3], clock())
  if head then redis.call('PUBLISH', KEYS[1], redis.sha1hex(head)) end
elseif held(v, ARGV[1]) then
  hand_over(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2])
  return 1
end
return 0
";
