-- A latch's count and the ttl left. Reads only.
--
-- `KEYS` latch. Returns `{count, pttl}`, or `{-1, -2}` when not set up.
local count = redis.call('HGET', KEYS[1], 'count')
if not count then return {-1, -2} end
return {tonumber(count), redis.call('PTTL', KEYS[1])}
