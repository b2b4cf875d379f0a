-- A write lock becomes a read lock in one step (no other writer can come
-- in between), and readers are woken.
--
-- `KEYS` lock, readers; `ARGV[1]` token, `ARGV[2]` ttl (ms). Returns 1, or
-- 0 when the token no longer held the write lock.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[2])
redis.call('DEL', KEYS[1])
redis.call('ZADD', KEYS[2], now_ms() + ttl, ARGV[1])
keep_key(KEYS[2], ttl)
publish(KEYS[1], '*')
return 1
