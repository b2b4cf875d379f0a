-- Resets the lease while the owner holds the record. `ARGV` owner, lease
-- (ms), and a third argument ignored (the lock's `EXTEND` takes one, so
-- the watchdog's batch sends both alike). Returns 1 or 0.
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
