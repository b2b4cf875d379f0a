-- Takes every lock of a group whose keys share one hash tag, or none.
--
-- `KEYS` lock 1, fence 1, waiters' signal 1 (shared/waiting.lua), lock
-- 2, fence 2, signal 2, ...; `ARGV[1]` token,
-- `ARGV[2]` ttl (ms), `ARGV[3]` the counters' retention (ms). Returns `{1,
-- fence 1, fence 2, ..}`, or `{0, i, pttl}` when lock `i` (from 1) is
-- another owner's (its waiters' signal set). A lock that already holds the token (a repeated
-- acquire) keeps its fencing token.
--
-- None or all, also when it fails: Redis does not undo the writes a
-- script made before an error, so an error after the first `SET` would
-- leave the locks before it held by a token no guard has (issue 32). So
-- the first loop reads every key the second one writes, before any write:
-- a lock or a counter of another type fails its `GET` there
-- (`WRONGTYPE`), and a counter that holds no number (which would fail
-- `next_fence`'s arithmetic) is refused with an error; past that loop
-- nothing can fail (`SET` replaces a string, the counters are numbers or
-- absent). The one write before an error or a busy answer is the
-- waiters' signal of a busy lock, which the waiters own, not a lock. The client gives
-- the group back after an error reply all the same (see
-- `OpError::may_have_written`), for a failure this does not foresee.
for i = 1, #KEYS, 3 do
  local holder = redis.call('GET', KEYS[i])
  if holder and holder ~= ARGV[1] then
    return {0, (i + 2) / 3, mark_waited(KEYS[i + 2], KEYS[i])}
  end
  local counter = redis.call('GET', KEYS[i + 1])
  if counter and not tonumber(counter) then
    return redis.error_reply('ERR a fencing counter of the group holds no number')
  end
end
local t = redis.call('TIME')
local out = {1}
for i = 1, #KEYS, 3 do
  if redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2], 'GET') then
    -- Ours already (a repeated acquire): its fencing token stands.
    out[#out + 1] = tonumber(redis.call('GET', KEYS[i + 1]) or '0')
  else
    out[#out + 1] = next_fence(KEYS[i + 1], ARGV[3], t)
  end
end
return out
