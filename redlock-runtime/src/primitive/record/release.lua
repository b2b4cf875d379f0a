-- in progress -> absent, for the owner only. `ARGV` owner. Returns 1 or 0.
if redis.call('HGET', KEYS[1], 'own') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
publish(KEYS[1], '')
return 1
