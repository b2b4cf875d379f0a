//! The scripts of the synchronizers: the read/write lock, the semaphore,
//! the countdown latch, and the multi-lock's group of keys under one hash
//! tag. Each takes all its keys in `KEYS` (one hash tag), reads the time
//! from Redis's `TIME` only, and is safe to send twice: a repeated acquire
//! finds its own token and keeps it, a repeated release or count-down
//! finds nothing left to do.
//!
//! Leases of readers and of semaphore holders live in a sorted set (token
//! -> lease deadline, ms on Redis's clock); every acquire first drops the
//! members whose deadline passed, so a dead holder frees its share within
//! its ttl, and each set's own expiry is kept at least as long as its
//! longest lease, so nothing is left once the last holder is gone.

use super::{HELD, Lua, NEXT_FENCE};

/// Shared Lua: Redis's clock (ms), dropping the members of a sorted set
/// whose deadline passed, and keeping a key at least `ms` longer.
const PRELUDE: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function drop_expired(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
end
local function keep_key(key, ms)
  local left = redis.call('PTTL', key)
  if left ~= -2 and left < ms then redis.call('PEXPIRE', key, ms) end
end
";

/// A reader's acquire: in unless a writer holds the lock or waits for it
/// (writers come first: a stream of readers cannot starve them).
///
/// `KEYS` lock (the writer), fence, readers, writers; `ARGV[1]` token,
/// `ARGV[2]` ttl (ms). Returns `{1, fence}` (the last write token issued,
/// which readers share) or `{0, pttl}` (-3: a writer waits).
///
/// With neither a writer nor a waiting writer's set (one `EXISTS` over
/// both), nothing can keep a reader out, so the checks below it (this
/// token already a reader, the writer's lease, live waiting writers) are
/// only made when one of them exists: the same answer, three calls fewer
/// on the usual path.
pub(crate) static READ_ACQUIRE: Lua = Lua::new(&[PRELUDE, READ_ACQUIRE_BODY]);
const READ_ACQUIRE_BODY: &str = r"
local now = now_ms()
local ttl = tonumber(ARGV[2])
local fence = tonumber(redis.call('GET', KEYS[2]) or '0')
if redis.call('EXISTS', KEYS[1], KEYS[4]) > 0 and not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  if redis.call('EXISTS', KEYS[1]) == 1 then return {0, redis.call('PTTL', KEYS[1])} end
  drop_expired(KEYS[4], now)
  if redis.call('ZCARD', KEYS[4]) > 0 then return {0, -3} end
end
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
keep_key(KEYS[3], ttl)
return {1, fence}
";

/// A writer's acquire: in when no other writer holds the lock and no live
/// reader is left; else it waits in the writers' set (keeping new readers
/// out) for `presence` ms after each ask (`0`: a writer that does not
/// wait, and keeps no one out).
///
/// `KEYS` lock, fence, readers, writers; `ARGV[1]` token, `ARGV[2]` ttl
/// (ms), `ARGV[3]` presence (ms), `ARGV[4]` the counter's retention (ms),
/// `ARGV[5]` `1` to return Redis's clock. Returns as the lock's `ACQUIRE`.
pub(crate) static WRITE_ACQUIRE: Lua = Lua::new(&[NEXT_FENCE, PRELUDE, WRITE_ACQUIRE_BODY]);
const WRITE_ACQUIRE_BODY: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = redis.call('GET', KEYS[1])
local fence
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  fence = tonumber(redis.call('GET', KEYS[2]) or '0')
else
  drop_expired(KEYS[3], now)
  local busy
  if holder then
    busy = redis.call('PTTL', KEYS[1])
  else
    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if first[2] then busy = tonumber(first[2]) - now end
  end
  if busy then
    local presence = tonumber(ARGV[3])
    if presence > 0 then
      redis.call('ZADD', KEYS[4], now + presence, ARGV[1])
      keep_key(KEYS[4], presence)
    end
    return {0, busy}
  end
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  fence = next_fence(KEYS[2], ARGV[4], t)
end
if ARGV[5] == '1' then return {1, fence, now} end
return {1, fence}
";

/// A writer's release or give-back: deletes the lock if the token holds
/// it, leaves the waiting writers, and wakes every waiter (readers may
/// all come in).
///
/// `KEYS` lock, writers; `ARGV[1]` token. Returns 1 (released) or 0.
pub(crate) static WRITE_RELEASE: Lua = Lua::new(&[WRITE_RELEASE_BODY]);
const WRITE_RELEASE_BODY: &str = r"
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 or released == 1 then
  redis.call('PUBLISH', KEYS[1], '*')
end
return released
";

/// A reader's release or give-back: leaves the readers; wakes the waiting
/// writers, if any. A second release finds nothing and changes nothing.
///
/// `KEYS` readers, lock (the channel), writers; `ARGV[1]` token. Returns 1
/// (released while its lease lasted) or 0.
pub(crate) static READ_RELEASE: Lua = Lua::new(&[PRELUDE, READ_RELEASE_BODY]);
const READ_RELEASE_BODY: &str = r"
local until_ms = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not until_ms then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('PUBLISH', KEYS[2], '*') end
if tonumber(until_ms) <= now_ms() then return 0 end
return 1
";

/// A write lock becomes a read lock in one step (no other writer can come
/// in between), and readers are woken.
///
/// `KEYS` lock, readers; `ARGV[1]` token, `ARGV[2]` ttl (ms). Returns 1, or
/// 0 when the token no longer held the write lock.
pub(crate) static DOWNGRADE: Lua = Lua::new(&[PRELUDE, DOWNGRADE_BODY]);
const DOWNGRADE_BODY: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[2])
redis.call('DEL', KEYS[1])
redis.call('ZADD', KEYS[2], now_ms() + ttl, ARGV[1])
keep_key(KEYS[2], ttl)
redis.call('PUBLISH', KEYS[1], '*')
return 1
";

/// Resets one lease in a sorted set (a reader's, a semaphore holder's) if
/// it has not run out; with a second key (a semaphore's permit counts)
/// keeps that one as long.
///
/// `KEYS[1]` the set, `KEYS[2]` (optional) its companion; `ARGV[1]` token,
/// `ARGV[2]` ttl (ms), `ARGV[3]` `1` for a watchdog renewal, which never
/// shortens the lease. Returns 1 or 0.
pub(crate) static LEASE_RENEW: Lua = Lua::new(&[PRELUDE, LEASE_RENEW_BODY]);
const LEASE_RENEW_BODY: &str = r"
local until_ms = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms()
if not until_ms or tonumber(until_ms) <= now then return 0 end
local ttl = tonumber(ARGV[2])
if ARGV[3] == '1' and tonumber(until_ms) >= now + ttl then return 1 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
keep_key(KEYS[1], ttl)
if #KEYS > 1 then keep_key(KEYS[2], ttl) end
return 1
";

/// Takes `n` permits of a semaphore of `limit` if that many are free.
/// Holders whose lease ran out are dropped first, with their permits.
///
/// `KEYS` holders (token -> lease deadline; also the channel), counts
/// (token -> permits); `ARGV[1]` token, `ARGV[2]` ttl (ms), `ARGV[3]`
/// limit, `ARGV[4]` n. Returns `{1, 0}` or `{0, ms until the first lease
/// ends}`. A repeated acquire finds its token and only resets its lease.
pub(crate) static PERMITS_ACQUIRE: Lua = Lua::new(&[PRELUDE, PERMITS_ACQUIRE_BODY]);
const PERMITS_ACQUIRE_BODY: &str = r"
local now = now_ms()
local ttl = tonumber(ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #gone do redis.call('HDEL', KEYS[2], gone[i]) end
drop_expired(KEYS[1], now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local used = 0
  local counts = redis.call('HVALS', KEYS[2])
  for i = 1, #counts do used = used + tonumber(counts[i]) end
  if used + tonumber(ARGV[4]) > tonumber(ARGV[3]) then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    if first[2] then return {0, tonumber(first[2]) - now} end
    return {0, -1}
  end
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
keep_key(KEYS[1], ttl)
keep_key(KEYS[2], ttl)
return {1, 0}
";

/// Gives a holder's permits back, once: a second release finds no token
/// and changes nothing. Publishes `*n` for `n` permits freed, which wakes
/// the `n` longest waiters of each client (as many as may get in).
///
/// `KEYS` holders, counts; `ARGV[1]` token. Returns 1 (released while its
/// lease lasted) or 0.
pub(crate) static PERMITS_RELEASE: Lua = Lua::new(&[PRELUDE, PERMITS_RELEASE_BODY]);
const PERMITS_RELEASE_BODY: &str = r"
local until_ms = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not until_ms then return 0 end
local freed = redis.call('HGET', KEYS[2], ARGV[1]) or '1'
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('PUBLISH', KEYS[1], string.format('*%d', tonumber(freed)))
if tonumber(until_ms) <= now_ms() then return 0 end
return 1
";

/// How many permits of a semaphore of `limit` are free (holders whose
/// lease ran out count as gone). Reads only.
///
/// `KEYS` holders, counts; `ARGV[1]` limit. Returns the number free.
pub(crate) static PERMITS_AVAILABLE: Lua = Lua::new(&[PRELUDE, PERMITS_AVAILABLE_BODY]);
const PERMITS_AVAILABLE_BODY: &str = r"
local live = redis.call('ZRANGEBYSCORE', KEYS[1], now_ms() + 1, '+inf')
local used = 0
for i = 1, #live do used = used + tonumber(redis.call('HGET', KEYS[2], live[i]) or '0') end
local free = tonumber(ARGV[1]) - used
if free < 0 then return 0 end
return free
";

/// Sets a latch's count, only if it is not set up, with its ttl; wakes
/// the waiters that started before the set-up.
///
/// `KEYS` latch; `ARGV[1]` count, `ARGV[2]` ttl (ms). Returns 1 (set) or 0.
pub(crate) static LATCH_SET: Lua = Lua::new(&[LATCH_SET_BODY]);
const LATCH_SET_BODY: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'count', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', KEYS[1], '*')
return 1
";

/// Counts a latch down once per request id: a count-down re-sent after a
/// lost answer finds its id and counts nothing. Reaching zero wakes every
/// waiter.
///
/// `KEYS` latch, ids (a set, expiring with the latch); `ARGV[1]` request
/// id. Returns the count left, or -1 when the latch is not set up.
pub(crate) static LATCH_COUNT_DOWN: Lua = Lua::new(&[LATCH_COUNT_DOWN_BODY]);
const LATCH_COUNT_DOWN_BODY: &str = r"
local count = redis.call('HGET', KEYS[1], 'count')
if not count then return -1 end
count = tonumber(count)
if count == 0 or redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return count end
redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1]))
count = redis.call('HINCRBY', KEYS[1], 'count', -1)
if count == 0 then redis.call('PUBLISH', KEYS[1], '*') end
return count
";

/// A latch's count and the ttl left. Reads only.
///
/// `KEYS` latch. Returns `{count, pttl}`, or `{-1, -2}` when not set up.
pub(crate) static LATCH_READ: Lua = Lua::new(&[LATCH_READ_BODY]);
const LATCH_READ_BODY: &str = r"
local count = redis.call('HGET', KEYS[1], 'count')
if not count then return {-1, -2} end
return {tonumber(count), redis.call('PTTL', KEYS[1])}
";

/// Takes every lock of a group whose keys share one hash tag, or none.
///
/// `KEYS` lock 1, fence 1, lock 2, fence 2, ...; `ARGV[1]` token,
/// `ARGV[2]` ttl (ms), `ARGV[3]` the counters' retention (ms). Returns `{1,
/// fence 1, fence 2, ..}`, or `{0, i, pttl}` when lock `i` (from 1) is
/// another owner's (marked as waited for: see [`HELD`]). A lock that already holds the token (a repeated
/// acquire) keeps its fencing token.
///
/// None or all, also when it fails: Redis does not undo the writes a
/// script made before an error, so an error after the first `SET` would
/// leave the locks before it held by a token no guard has (issue 32). So
/// the first loop reads every key the second one writes, before any write:
/// a lock or a counter of another type fails its `GET` there
/// (`WRONGTYPE`), and a counter that holds no number (which would fail
/// `next_fence`'s arithmetic) is refused with an error; past that loop
/// nothing can fail (`SET` replaces a string, the counters are numbers or
/// absent). The one write before an error or a busy answer is the mark
/// of a busy lock, which is the other owner's, not ours. The client gives
/// the group back after an error reply all the same (see
/// `OpError::may_have_written`), for a failure this does not foresee.
pub(crate) static GROUP_ACQUIRE: Lua = Lua::new(&[HELD, NEXT_FENCE, GROUP_ACQUIRE_BODY]);
const GROUP_ACQUIRE_BODY: &str = r"
for i = 1, #KEYS, 2 do
  local holder = redis.call('GET', KEYS[i])
  if holder and not held(holder, ARGV[1]) then
    mark_waited(KEYS[i], holder)
    return {0, (i + 1) / 2, redis.call('PTTL', KEYS[i])}
  end
  local counter = redis.call('GET', KEYS[i + 1])
  if counter and not tonumber(counter) then
    return redis.error_reply('ERR a fencing counter of the group holds no number')
  end
end
local t = redis.call('TIME')
local out = {1}
for i = 1, #KEYS, 2 do
  local before = redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2], 'GET')
  if before then
    -- Ours already: a waiter's mark stays.
    if before ~= ARGV[1] then mark_waited(KEYS[i], ARGV[1]) end
    out[#out + 1] = tonumber(redis.call('GET', KEYS[i + 1]) or '0')
  else
    out[#out + 1] = next_fence(KEYS[i + 1], ARGV[3], t)
  end
end
return out
";
