-- in progress -> completed, for the owner only. `ARGV` owner, state (`c`
-- or `n`), status code, headers, body, retention (ms). Returns 1 or 0.
--
-- The completed record keeps who completed it (`by`), so the script is
-- its own evidence: sent again after its answer was lost (and it ran), it
-- finds the record completed by this owner and answers 1 again, instead
-- of a 0 that would claim the lease was lost before the result was
-- stored.
local own = redis.call('HMGET', KEYS[1], 'own', 'by')
if own[1] ~= ARGV[1] then
  if not own[1] and own[2] == ARGV[1] then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], 'st', ARGV[2], 'code', ARGV[3], 'hdr', ARGV[4], 'body', ARGV[5], 'by', ARGV[1])
redis.call('HDEL', KEYS[1], 'own')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
publish(KEYS[1], '')
return 1
