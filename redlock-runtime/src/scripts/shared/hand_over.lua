-- `hand_over(key, queue, waiters, counter, retention)` (after
-- shared/fair.lua, shared/fence.lua and shared/publish.lua): the lock `key`, which its holder
-- gives up, goes to the first live waiter in line (a grant, see
-- fair/release.lua); with no live waiter it is deleted.
local function hand_over(key, queue, waiters, counter, retention)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local head = purge(queue, waiters, now)
  if not head then
    redis.call('DEL', key)
    publish(key, '')
    return
  end
  local lease = tonumber(redis.call('ZSCORE', waiters, head)) - now
  redis.call('LPOP', queue)
  redis.call('ZREM', waiters, head)
  redis.call('SET', key, head, 'PX', lease)
  local fence = next_fence(counter, retention, t)
  publish(key, string.format('%s\31%.0f\31%.0f', redis.sha1hex(head), fence, now))
end
