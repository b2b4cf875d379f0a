-- Ends the lock and the read/write lock of one name, whoever holds them,
-- and raises their fencing counters: every token issued from now on is
-- above the ended holders' (Redlock: on each node that runs it). Wakes
-- their waiters as a release does (the first fair waiter by its id).
--
-- Each ended holder's `redis.sha1hex` of its token (less the byte 31
-- that a waiter of an earlier version appended to its holder's value,
-- which this version's waiters never write: shared/waiting.lua) joins a
-- set: what the ended holder's client reads, once its
-- renewal or release finds the lease gone, to say it was ended by an
-- operator (see `loss.rs`). The set is kept as long as the longest ended
-- lease would have lasted, and `ARGV[2]` ms more (for the read that
-- follows an answer): past its lease's end a holder's client knows by its
-- own clock that the lease ran out, and asks nothing, so nothing is left
-- behind for longer (only the counters stay, as after every lock). The hash
-- names a holder without granting power over a lease; a token leaves
-- Redis only in this reply, to the operator's client, which keeps the
-- name and time of its public part and drops the rest.
--
-- `KEYS` lock, lock fence, fair queue, rw, rw fence, readers, ended
-- holders (one hash tag); `ARGV` the counters' retention (ms), how long
-- to keep the ended holders' ids past the longest ended lease (ms). Returns
-- `{lock fence or '', write fence or '', {ended tokens}, now (ms), the
-- lock's counter before it was raised or '', the write counter's}`: the
-- lock's holder is the first token when the lock fence is set, the writer
-- the next when the write fence is; the counters as they were say when a
-- holder that waited in a line was granted its lease (`owner::granted`).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ended, fence, write_fence, longest = {}, '', '', 0
local function mark(token, left)
  if string.byte(token, -1) == 31 then token = string.sub(token, 1, -2) end
  redis.call('SADD', KEYS[7], redis.sha1hex(token))
  ended[#ended + 1] = token
  if left > longest then longest = left end
end
local prior, write_prior = '', ''
local lock = redis.call('GET', KEYS[1])
if lock then
  mark(lock, redis.call('PTTL', KEYS[1]))
  prior = redis.call('GET', KEYS[2]) or ''
  redis.call('DEL', KEYS[1])
  fence = string.format('%.0f', next_fence(KEYS[2], ARGV[1], t))
  local head = redis.call('LINDEX', KEYS[3], 0)
  publish(KEYS[1], head and redis.sha1hex(head) or '')
end
local writer = redis.call('GET', KEYS[4])
if writer then
  mark(writer, redis.call('PTTL', KEYS[4]))
  write_prior = redis.call('GET', KEYS[5]) or ''
  redis.call('DEL', KEYS[4])
  write_fence = string.format('%.0f', next_fence(KEYS[5], ARGV[1], t))
end
local readers = redis.call('ZRANGEBYSCORE', KEYS[6], now + 1, '+inf', 'WITHSCORES')
for i = 1, #readers, 2 do mark(readers[i], tonumber(readers[i + 1]) - now) end
if #readers > 0 then redis.call('DEL', KEYS[6]) end
if writer or #readers > 0 then publish(KEYS[4], '*') end
if #ended > 0 then
  local keep = longest + tonumber(ARGV[2])
  if redis.call('PTTL', KEYS[7]) < keep then redis.call('PEXPIRE', KEYS[7], keep) end
end
return {fence, write_fence, ended, string.format('%d', now), prior, write_prior}
