-- Runs several one-lock calls in order, each through the very step its
-- own script runs (lock/acquire_lock.lua, lock/release_lock.lua), and answers each
-- so that the client reads it back as its own script's answer: a call's
-- answer is the same whether it went alone or in a batch (an acquire's
-- comes as one number, below). Each call runs under `pcall`,
-- so one that fails (a key holding another type) answers with its error
-- and the others still run.
--
-- Its keys belong to different locks, so it is sent only to a server that
-- holds every slot (one Redis, a Sentinel primary), never to a cluster
-- node; a server or proxy that refuses a script over several slots makes
-- the client send each call alone from then on.
--
-- `ARGV[1]` the fencing counters' retention (ms); then per call, its
-- code and arguments, with its keys in `KEYS` in the same order:
-- - `f`, token, ttl (ms); `KEYS` lock, counter, the waiters' signal
-- (shared/waiting.lua): a fenced acquire,
-- answering with one number: the fencing token (at least 1) when it
-- took the lock, or `-2 - pttl` (at most -1) when another owner holds
-- it. The client reads it back as `{1, fence}` or `{0, pttl}`, what
-- lock/acquire.lua answers. One number and not that table:
-- building and sending a table per acquire cost Redis a tenth of the
-- batch's time in lockbench at concurrency 32 (16.7 µs of `EVALSHA` per
-- fenced pair against 15.1, Redis 7.0's `INFO commandstats`), and about
-- a fifth in a pipelined loop of batches alone;
-- - `r`, token; `KEYS` lock, the waiters' signal: a release, answering
-- 1 or 0.
--
-- Returns one answer per call, in order. Redis's clock is read once, for
-- the first fenced acquire, and serves every fenced acquire of the batch
-- (see shared/fence.lua's `next_fence_at`): tokens still increase per key,
-- because each token is the larger of its counter + 1 and that reading.
local retention, now_us, now_text = ARGV[1], nil, nil
local out, k, a = {}, 1, 2
while a <= #ARGV do
  local code, ok, res, n = ARGV[a], false, nil, nil
  if code == 'f' then
    if not now_us then now_us, now_text = clock_us(redis.call('TIME')) end
    ok, res, n = pcall(acquire_lock, KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a + 1], ARGV[a + 2], retention, now_us, now_text)
    if ok then
      if res == 1 then res = n else res = -2 - n end
    end
    k, a = k + 3, a + 3
  elseif code == 'r' then
    ok, res = pcall(release_lock, KEYS[k], KEYS[k + 1], ARGV[a + 1])
    k, a = k + 2, a + 2
  else
    return redis.error_reply('ERR unknown call in a redlock batch')
  end
  if not ok then
    res = {err = (type(res) == 'table' and res.err) or tostring(res)}
  end
  out[#out + 1] = res
end
return out
