-- `publish(channel, message)` on a Redis Cluster node: `SPUBLISH`
-- (sharded pub/sub, Redis 7) stays on the shard that owns the channel's
-- slot, where plain `PUBLISH` would be sent to every node. Under `pcall`:
-- on a cluster older than Redis 7 (no `SPUBLISH`) the script's write still
-- happens, and waiters poll. The one-server variant is shared/publish.lua.
local function publish(channel, message)
  redis.pcall('SPUBLISH', channel, message)
end
