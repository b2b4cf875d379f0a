-- Resets the lease if the token still holds the lock.
--
-- `KEYS[1]` lock; `ARGV[1]` token, `ARGV[2]` ttl (ms), `ARGV[3]` `1` for
-- a watchdog renewal, which never shortens the lease: a manual extend
-- sent on another connection may have landed first with a longer one.
-- Returns 1 or 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '1' and redis.call('PTTL', KEYS[1]) >= tonumber(ARGV[2]) then return 1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
