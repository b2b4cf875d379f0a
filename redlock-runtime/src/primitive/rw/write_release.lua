-- A writer's release or give-back: deletes the lock if the token holds
-- it, leaves the waiting writers, and wakes every waiter (readers may
-- all come in).
--
-- `KEYS` lock, writers; `ARGV[1]` token. Returns 1 (released) or 0.
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 or released == 1 then
  publish(KEYS[1], '*')
end
return released
