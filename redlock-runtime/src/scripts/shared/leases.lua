-- `now_ms()`, `drop_expired(key, now)` and `keep_key(key, ms)`, for the
-- synchronizers' scripts: Redis's clock (ms), dropping the members of a
-- sorted set of leases whose deadline passed, and keeping a key at least
-- `ms` longer.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function drop_expired(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
end
local function keep_key(key, ms)
  local left = redis.call('PTTL', key)
  if left ~= -2 and left < ms then redis.call('PEXPIRE', key, ms) end
end
