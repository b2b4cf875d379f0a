-- `held(v, token)` and `mark_waited(key, v)`: whose a lock's value is, and
-- the waiter's mark (`WAITED_MARK` in scripts.rs: byte 31, Lua's `'\31'`).
--
-- `held(v, token)`: whether the value `v` (`GET`'s reply: `false` when the
-- key is gone) is `token`'s, as its acquire wrote it or marked by a
-- waiter since. Every script that checks a plain lock's holder checks it
-- with this, so a mark never costs its holder the lock.
--
-- `mark_waited(key, v)`: marks the lock `key`, whose value is `v`, as
-- waited for (once: `APPEND` keeps the lease), if its holder's token
-- starts with `~` (`owner::MARKABLE`, byte 126):
-- a holder of an older version, whose scripts would take the mark for
-- another owner's value, is left alone (its release always publishes).
-- An acquire attempt that
-- finds the lock busy marks it, in the same step; a waiter subscribes to
-- the lock's channel before it sends such an attempt. So the release of
-- a lock with a waiter always finds the mark and publishes: either the
-- waiter's attempt ran first (it marked) or the release did (the attempt
-- finds the lock free, or another holder, which it marks in turn).
local function held(v, token)
  if v == token then return true end
  return v ~= false and #v == #token + 1 and string.byte(v, -1) == 31
    and string.sub(v, 1, -2) == token
end
local function mark_waited(key, v)
  if string.byte(v, 1) == 126 and string.byte(v, -1) ~= 31 then
    redis.call('APPEND', key, '\31')
  end
end
