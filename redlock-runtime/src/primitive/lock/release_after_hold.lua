-- Ends a lock that must be held for a minimum time (ShedLock's
-- `lockAtLeastFor`), measured on Redis's clock: if the minimum is not over,
-- shortens the lease to what is left of it; else deletes the lock.
--
-- `KEYS[1]` lock, `KEYS[2]` the fair queue (absent for an unfair lock);
-- `ARGV[1]` token, `ARGV[2]` acquire time on Redis's clock (ms), `ARGV[3]`
-- minimum hold (ms). Returns 0 (not the owner), 1 (deleted) or 2 (left to
-- expire when the minimum hold ends). A deletion publishes the first fair
-- waiter's id (`redis.sha1hex` of its token, never the token: see
-- `waiter_id` in `store/subscribe/message.rs`), as fair/leave.lua does, so
-- that it is the one woken; an empty message when no one is in line.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(ARGV[2]) + tonumber(ARGV[3]) - now
if left > 0 then
  redis.call('PEXPIRE', KEYS[1], left)
  return 2
end
redis.call('DEL', KEYS[1])
local head = redis.call('LINDEX', KEYS[2], 0)
publish(KEYS[1], head and redis.sha1hex(head) or '')
return 1
