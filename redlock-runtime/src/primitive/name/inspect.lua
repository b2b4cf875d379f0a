-- Everything under one name: the lock, its fencing counter and fair
-- waiters; the read/write lock's writer, counter, readers and waiting
-- writers; the semaphore's holders. Leases that ran out are left out.
--
-- `KEYS` lock, fence, fair waiters (zset), rw, rw fence, readers, writers,
-- semaphore holders, permit counts, the holders an operator ended (a set:
-- see `FORCE_RELEASE`), all under one hash tag. Returns `{now_ms, lock
-- value or '', lock pttl, fence or '', live fair waiters, writer or '',
-- writer pttl, write fence or '', {reader, deadline, ..}, live waiting
-- writers, {holder, deadline, permits, ..}, {ended holder's hash, ..}}`.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local readers = redis.call('ZRANGEBYSCORE', KEYS[6], now + 1, '+inf', 'WITHSCORES')
local holders = redis.call('ZRANGEBYSCORE', KEYS[8], now + 1, '+inf', 'WITHSCORES')
local permits = {}
for i = 1, #holders, 2 do
  permits[#permits + 1] = holders[i]
  permits[#permits + 1] = holders[i + 1]
  permits[#permits + 1] = redis.call('HGET', KEYS[9], holders[i]) or '0'
end
return {
  string.format('%d', now),
  redis.call('GET', KEYS[1]) or '',
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]) or '',
  redis.call('ZCOUNT', KEYS[3], now + 1, '+inf'),
  redis.call('GET', KEYS[4]) or '',
  redis.call('PTTL', KEYS[4]),
  redis.call('GET', KEYS[5]) or '',
  readers,
  redis.call('ZCOUNT', KEYS[7], now + 1, '+inf'),
  permits,
  redis.call('SMEMBERS', KEYS[10]),
}
