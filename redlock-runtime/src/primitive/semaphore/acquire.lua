-- Takes `n` permits of a semaphore of `limit` if that many are free.
-- Holders whose lease ran out are dropped first, with their permits.
--
-- `KEYS` holders (token -> lease deadline; also the channel), counts
-- (token -> permits); `ARGV[1]` token, `ARGV[2]` ttl (ms), `ARGV[3]`
-- limit, `ARGV[4]` n. Returns `{1, 0}` or `{0, ms until the first lease
-- ends}`. A repeated acquire finds its token and only resets its lease.
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
