-- `mark_waited(waited, key)`: a waiter's "someone waits" signal, on a
-- key the waiters own (`prefix{name}:waited`, in the lock's slot), never
-- on the holder's value: every script compares a lock's value with its
-- holder's token exactly.
--
-- An acquire attempt that finds the lock `key` busy sets `waited` (one
-- `SET`, whatever it held) for as long as the lock's lease has left plus
-- 2 s, and returns that lease's `PTTL` (which the busy answer carries
-- anyway). The holder's release deletes the lock and `waited` in one
-- `DEL`, and publishes only when `waited` was there
-- (lock/release_lock.lua). So the release of a lock with a waiter
-- publishes:
-- - a waiter subscribes to the lock's channel before it sends such an
--   attempt, so either the attempt ran first (it set `waited`) or the
--   release did (the attempt then finds the lock free, or another
--   holder, whose `waited` it sets in turn);
-- - `waited` outlives the lease it was set under by 2 s, and a waiter
--   sends its next attempt no later than that lease's end (it sleeps at
--   most the `PTTL` it was answered, plus 1 ms: `backoff::next_sleep`),
--   which sets it again; a renewal only moves the lease's end later.
--   Past those 2 s (a waiter stalled that long) the waiter's own timer
--   still wakes it: a missed publish costs latency, never the lock.
-- A `waited` left behind by a waiter that gave up costs one publish to no
-- one, at most one lease later.
--
-- Without `waited` (`nil`: a caller that sends no such key) it only
-- returns the `PTTL`.
local function mark_waited(waited, key)
  local pttl = redis.call('PTTL', key)
  if waited then
    redis.call('SET', waited, '1', 'PX', math.max(pttl, 0) + 2000)
  end
  return pttl
end
