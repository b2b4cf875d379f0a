-- Fair acquire: the lock goes to the first live waiter in arrival order.
--
-- `KEYS` lock, fence, queue (list of waiter tokens), waiters (zset: token
-- -> presence deadline, ms on Redis's clock); `ARGV[1]` token, `ARGV[2]`
-- ttl (ms), `ARGV[3]` presence (ms): how long this waiter keeps its place
-- without asking again, `ARGV[4]` `1` to return Redis's clock, `ARGV[5]`
-- the fencing counter's retention (ms).
-- Returns as lock/acquire.lua (with pttl -3: free, but another
-- waiter is first).
-- It sets no waiters' signal (see shared/waiting.lua): a fair waiter is
-- woken by the fair release that names it, and a plain release (of the
-- same key taken unfairly) wakes plain waiters only, so a fair waiter
-- behind it polls, as before.
--
-- The hand-off path (the lock is free and the caller is first in line, or
-- no one waits) reads no clock and purges nothing.
local holder = redis.call('GET', KEYS[1])
local fence
if holder == ARGV[1] then
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
