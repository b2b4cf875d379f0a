-- Issues the fencing token of a lock taken without one (a plain `SET
-- NX`), if the token still holds it: tokens are then issued in the order
-- of tenure, because tenures do not overlap and each issue checks its
-- holder's tenure in the same step (see `design`, "Fencing
-- tokens").
--
-- `KEYS[1]` lock, `KEYS[2]` fencing counter; `ARGV[1]` token, `ARGV[2]`
-- the counter's retention (ms). Returns the token, or -1 when the lock is
-- not this owner's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
return next_fence(KEYS[2], ARGV[2], redis.call('TIME'))
