-- A fair waiter gives up (its wait ran out, it was cancelled, an answer
-- was lost): its give-back, in one step. It leaves the line; if it holds
-- the lock (an attempt whose answer it never saw took it, or a release
-- granted it, see fair/release.lua), the lock goes on to the next waiter
-- as its release would; if the lock is free, the next waiter is woken
-- (the message is its id, as in a grant: never its token).
-- One script, so no grant can land between the give-back's release and
-- its leave.
--
-- `KEYS` lock, queue, waiters, fence; `ARGV[1]` token, `ARGV[2]` the
-- fencing counter's retention (ms). Returns 1 when it held the lock, else
-- 0.
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local v = redis.call('GET', KEYS[1])
if not v then
  local head = purge(KEYS[2], KEYS[3], clock())
  if head then publish(KEYS[1], redis.sha1hex(head)) end
elseif v == ARGV[1] then
  hand_over(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2])
  return 1
end
return 0
