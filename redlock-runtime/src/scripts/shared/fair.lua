-- `clock()` and `purge(queue, waiters, now)`, for the fair scripts:
-- Redis's clock in ms, and dropping the waiters at the head of the line
-- (`queue`, a list of tokens) whose presence (in `waiters`, a sorted set
-- of token -> presence deadline) ran out; `purge` returns the first live
-- waiter's token, or nil.
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function purge(queue, waiters, now)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then return nil end
    local until_ms = redis.call('ZSCORE', waiters, head)
    if until_ms and tonumber(until_ms) > now then return head end
    redis.call('LPOP', queue)
    redis.call('ZREM', waiters, head)
  end
end
