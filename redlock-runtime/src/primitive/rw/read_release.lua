-- A reader's release or give-back: leaves the readers; wakes the waiting
-- writers, if any. A second release finds nothing and changes nothing.
--
-- `KEYS` readers, lock (the channel), writers; `ARGV[1]` token. Returns 1
-- (released while its lease lasted) or 0.
local until_ms = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not until_ms then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 1 then publish(KEYS[2], '*') end
if tonumber(until_ms) <= now_ms() then return 0 end
return 1
