-- Deletes the lock if the token still holds it and, when someone waits
-- for it (its waiters' signal, shared/waiting.lua), publishes on the
-- channel named like the lock key, which wakes the waiters; never touches
-- another owner's lock (lock/release_lock.lua). The signal goes in the
-- `DEL` the release sends anyway, so a lock no one waited for is released
-- with rslock's two commands (`GET`, `DEL`); a `PUBSUB NUMSUB` check
-- measured slower than always publishing (lockbench `--only
-- candidates`), and would miss a waiter subscribed on a replica, which a
-- publish (and the signal) reaches through replication.
--
-- Raises the fencing counter to the holder's token (whoever holds the lock
-- now: raising is always safe): on a Redlock node that did not issue the
-- largest token itself, this is what makes the next holder's token larger
-- (see `design`, "Fencing tokens").
--
-- `KEYS[1]` lock, `KEYS[2]` the waiters' signal (absent: always
-- publish); `ARGV[1]` token. With a token to raise the counter to
-- (Redlock): `KEYS[3]` fencing counter, `ARGV[2]` the holder's fencing
-- token, `ARGV[3]` the counter's retention (ms). Returns 1 (released) or
-- 0.
local released = release_lock(KEYS[1], KEYS[2], ARGV[1])
if #KEYS > 2 and tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[3]) or '0') then
  redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
end
return released
