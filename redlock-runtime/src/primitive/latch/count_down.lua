-- Counts a latch down once per request id: a count-down re-sent after a
-- lost answer finds its id and counts nothing. Reaching zero wakes every
-- waiter.
--
-- `KEYS` latch, ids (a set, expiring with the latch); `ARGV[1]` request
-- id. Returns the count left, or -1 when the latch is not set up.
local count = redis.call('HGET', KEYS[1], 'count')
if not count then return -1 end
count = tonumber(count)
if count == 0 or redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return count end
redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1]))
count = redis.call('HINCRBY', KEYS[1], 'count', -1)
if count == 0 then publish(KEYS[1], '*') end
return count
