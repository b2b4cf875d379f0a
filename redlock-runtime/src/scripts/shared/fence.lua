-- `next_fence(key, retention, t)`: the next fencing token of the counter `key`, given `t` (the reply
-- of `TIME`): the larger of the counter + 1 and Redis's clock in
-- microseconds, stored back with an expiry of `retention` ms.
--
-- The clock floor is what keeps tokens increasing when the counter is
-- gone (it expired, the node restarted without persistence) or older than
-- the tokens issued from it (restored from a snapshot): a counter
-- starting over starts above every token issued before, as long as the
-- clock did not step back by more than the time since (see the crate
-- docs, "Fencing tokens"). Numbers stay exact: microseconds since 1970 are
-- about 2^51, below Lua's 2^53, and `%.0f` writes them without exponent.
--
-- One write in the usual case: `SET .. GET` (Redis 6.2) stores the clock
-- and returns the counter it replaced; only a counter already at or past
-- the clock (tokens issued within one microsecond, a Redlock node's raise
-- from a clock ahead of this one) takes a second `SET`.
--
-- `clock_us(t)` gives the clock in microseconds as a number and as the
-- text stored, and `next_fence_at(key, retention, now_us, now_text)`
-- issues from them, for a script that issues several tokens from one
-- reading of the clock (the batch of coalesced acquires): each key's
-- tokens still increase, as each is the larger of its counter + 1 and
-- that reading.
local function clock_us(t)
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return now_us, string.format('%.0f', now_us)
end
local function next_fence_at(key, retention, now_us, now_text)
  local n = tonumber(redis.call('SET', key, now_text, 'PX', retention, 'GET') or '0') + 1
  if n > now_us then
    redis.call('SET', key, string.format('%.0f', n), 'PX', retention)
    return n
  end
  return now_us
end
local function next_fence(key, retention, t)
  local now_us, now_text = clock_us(t)
  return next_fence_at(key, retention, now_us, now_text)
end
