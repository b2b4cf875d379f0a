-- Gives a holder's permits back, once: a second release finds no token
-- and changes nothing. Publishes `*n` for `n` permits freed, which wakes
-- the `n` longest waiters of each client (as many as may get in).
--
-- `KEYS` holders, counts; `ARGV[1]` token. Returns 1 (released while its
-- lease lasted) or 0.
local until_ms = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not until_ms then return 0 end
local freed = redis.call('HGET', KEYS[2], ARGV[1]) or '1'
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
publish(KEYS[1], string.format('*%d', tonumber(freed)))
if tonumber(until_ms) <= now_ms() then return 0 end
return 1
