-- `release_lock(key, token)`: the lock's release step, shared by
-- lock/release.lua and the batch of coalesced calls (lock/batch.lua), so
-- that a lock released in a batch goes through exactly the step of one
-- released alone. Needs shared/publish.lua.
--
-- Deletes the lock `key` if `token` holds it and, when a waiter marked it
-- (see shared/held.lua), publishes on the channel named like it, which
-- wakes its waiters; returns 1, or 0 (another owner's, or gone). The
-- holder check is shared/held.lua's `held`, written out (the value as
-- written first, a marked one only when that fails): this runs on every
-- release, and a call to `held` would cost a closure per call.
local function release_lock(key, token)
  local v = redis.call('GET', key)
  if v == token then
    redis.call('DEL', key)
    return 1
  end
  if v and #v == #token + 1 and string.byte(v, -1) == 31 and string.sub(v, 1, -2) == token then
    redis.call('DEL', key)
    publish(key, '')
    return 1
  end
  return 0
end
