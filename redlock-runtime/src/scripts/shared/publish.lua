-- `publish(channel, message)` on one Redis server (and on each of
-- Redlock's nodes): plain `PUBLISH`, heard by the subscriber connected to
-- that server. The Cluster's variant is shared/spublish.lua; a script
-- gets one or the other (see `Part::Publish` in scripts.rs).
local function publish(channel, message)
  redis.call('PUBLISH', channel, message)
end
