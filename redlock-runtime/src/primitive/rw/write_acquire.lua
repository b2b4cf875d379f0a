-- A writer's acquire: in when no other writer holds the lock and no live
-- reader is left; else it waits in the writers' set (keeping new readers
-- out) for `presence` ms after each ask (`0`: a writer that does not
-- wait, and keeps no one out).
--
-- `KEYS` lock, fence, readers, writers; `ARGV[1]` token, `ARGV[2]` ttl
-- (ms), `ARGV[3]` presence (ms), `ARGV[4]` the counter's retention (ms),
-- `ARGV[5]` `1` to return Redis's clock. Returns as the lock's `ACQUIRE`.
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
