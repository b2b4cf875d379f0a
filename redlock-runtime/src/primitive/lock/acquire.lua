-- Takes the lock and issues its fencing token in one step (see
-- lock/acquire_lock.lua).
--
-- `KEYS[1]` lock, `KEYS[2]` fencing counter, `KEYS[3]` the waiters'
-- signal (shared/waiting.lua); `ARGV[1]` token, `ARGV[2]`
-- ttl (ms), `ARGV[3]` the counter's retention (ms), `ARGV[4]` `1` to also
-- return Redis's clock (ms), `ARGV[5]` the time (ms, on Redis's clock)
-- before which this node grants nothing (`0`: none; a restart delay).
-- Returns `{1, fence}` (or `{1, fence, now_ms}`) when the lock is ours,
-- `{0, pttl}` when another owner holds it, `{-4, ms left}` before
-- `ARGV[5]`.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local not_before = tonumber(ARGV[5])
if not_before > now_ms then return {-4, not_before - now_ms} end
local now_us, now_text = clock_us(t)
local got, n = acquire_lock(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], now_us, now_text)
if got == 1 and ARGV[4] == '1' then return {1, n, now_ms} end
return {got, n}
