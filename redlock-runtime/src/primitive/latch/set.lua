-- Sets a latch's count, only if it is not set up, with its ttl; wakes
-- the waiters that started before the set-up.
--
-- `KEYS` latch; `ARGV[1]` count, `ARGV[2]` ttl (ms). Returns 1 (set) or 0.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'count', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
publish(KEYS[1], '*')
return 1
