-- A reader's acquire: in unless a writer holds the lock or waits for it
-- (writers come first: a stream of readers cannot starve them).
--
-- `KEYS` lock (the writer), fence, readers, writers; `ARGV[1]` token,
-- `ARGV[2]` ttl (ms). Returns `{1, fence}` (the last write token issued,
-- which readers share) or `{0, pttl}` (-3: a writer waits).
--
-- With neither a writer nor a waiting writer's set (one `EXISTS` over
-- both), nothing can keep a reader out, so the checks below it (this
-- token already a reader, the writer's lease, live waiting writers) are
-- only made when one of them exists: the same answer, three calls fewer
-- on the usual path.
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
