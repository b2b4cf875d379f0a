-- Resets one lease in a sorted set (a reader's, a semaphore holder's) if
-- it has not run out; with a second key (a semaphore's permit counts)
-- keeps that one as long.
--
-- `KEYS[1]` the set, `KEYS[2]` (optional) its companion; `ARGV[1]` token,
-- `ARGV[2]` ttl (ms), `ARGV[3]` `1` for a watchdog renewal, which never
-- shortens the lease. Returns 1 or 0.
local until_ms = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms()
if not until_ms or tonumber(until_ms) <= now then return 0 end
local ttl = tonumber(ARGV[2])
if ARGV[3] == '1' and tonumber(until_ms) >= now + ttl then return 1 end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
keep_key(KEYS[1], ttl)
if #KEYS > 1 then keep_key(KEYS[2], ttl) end
return 1
