-- `acquire_lock(key, counter, waited, token, ttl, retention, now_us, now_text)`:
-- the lock's acquire step, shared by lock/acquire.lua and the batch of
-- coalesced calls (lock/batch.lua), so that a lock taken in a batch goes
-- through exactly the step of one taken alone. Needs shared/waiting.lua and
-- shared/fence.lua; the clock comes as `clock_us` gives it.
--
-- Takes the lock `key` for `token` with a lease of `ttl` ms and issues its
-- fencing token from `counter`; returns two values, `1, fence`, or
-- `0, pttl` when another owner holds it (two values, not a table: the
-- batch answers each acquire with one number, and builds no table it
-- would throw away). When the lock already holds `token` (an earlier
-- attempt of this same acquire got through but its answer was lost) the
-- lease is reset and a new token issued (the earlier attempt may have
-- been a plain `SET NX`, which issued none), so a retried acquire never
-- locks itself out nor repeats the previous holder's token.
--
-- A busy answer signals that someone waits, on `waited` (shared/waiting.lua).
local function acquire_lock(key, counter, waited, token, ttl, retention, now_us, now_text)
  if redis.call('SET', key, token, 'NX', 'PX', ttl) then
    return 1, next_fence_at(counter, retention, now_us, now_text)
  end
  if redis.call('GET', key) == token then
    -- Ours already (an earlier attempt, maybe a plain SET NX whose answer
    -- was lost): the counter may still hold the previous holder's token,
    -- so issue a new one, inside this tenure.
    redis.call('PEXPIRE', key, ttl)
    return 1, next_fence_at(counter, retention, now_us, now_text)
  end
  return 0, mark_waited(waited, key)
end
