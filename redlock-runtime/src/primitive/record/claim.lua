-- absent -> in progress. `KEYS` record, counter. `ARGV` owner, lease
-- (ms), fingerprint, counter retention (ms). Returns `{'claimed', fence}`,
-- `{'mismatch'}`, `{'processing', pttl}` or `{state, code, hdr, body}`.
-- Repeating it with the same owner while in progress answers
-- `processing`: the give-back of a claim whose answer was lost releases it.
local rec = redis.call('HMGET', KEYS[1], 'st', 'fp')
if not rec[1] then
  local fence = string.format('%.0f', next_fence(KEYS[2], ARGV[4], redis.call('TIME')))
  redis.call('HSET', KEYS[1], 'st', 'p', 'own', ARGV[1], 'fen', fence, 'fp', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'claimed', fence}
end
if rec[2] ~= ARGV[3] then return {'mismatch'} end
if rec[1] == 'p' then return {'processing', tostring(redis.call('PTTL', KEYS[1]))} end
local done = redis.call('HMGET', KEYS[1], 'code', 'hdr', 'body')
return {rec[1], done[1] or '', done[2] or '', done[3] or ''}
