-- How many permits of a semaphore of `limit` are free (holders whose
-- lease ran out count as gone). Reads only.
--
-- `KEYS` holders, counts; `ARGV[1]` limit. Returns the number free.
local live = redis.call('ZRANGEBYSCORE', KEYS[1], now_ms() + 1, '+inf')
local used = 0
for i = 1, #live do used = used + tonumber(redis.call('HGET', KEYS[2], live[i]) or '0') end
local free = tonumber(ARGV[1]) - used
if free < 0 then return 0 end
return free
