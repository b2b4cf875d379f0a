-- `release_lock(key, waited, token)`: the lock's release step, shared by
-- lock/release.lua and the batch of coalesced calls (lock/batch.lua), so
-- that a lock released in a batch goes through exactly the step of one
-- released alone. Needs shared/publish.lua.
--
-- Deletes the lock `key` if `token` holds it, with its waiters' signal
-- `waited` in the same `DEL`, and when that signal was there (see
-- shared/waiting.lua) publishes on the channel named like the lock, which
-- wakes its waiters; returns 1, or 0 (another owner's, or gone). Without
-- `waited` (`nil`: a caller that sends the lock's key alone) it always
-- publishes. A lock no one waited for is released with rslock's two
-- commands (`GET`, `DEL`), one more key in the `DEL`.
local function release_lock(key, waited, token)
  if redis.call('GET', key) ~= token then return 0 end
  if not waited then
    redis.call('DEL', key)
    publish(key, '')
  elseif redis.call('DEL', key, waited) == 2 then
    publish(key, '')
  end
  return 1
end
