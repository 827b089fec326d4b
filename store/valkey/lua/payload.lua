-- payload: store the payload of a job awaiting it; the job becomes ready.
-- ARGV: job id, site, payload JSON, the payload's recipient key id.
-- Reply: {'ok'} or {'refused', code[, state]}.
-- Re-run: the job is no longer awaiting, so the re-run is refused as
-- too-late and changes nothing.
local now = clock_now()
local id, site, payload, recipient = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local rec, how = live(id, now)
if how == 'unreadable' then
  return unreadable(id)
end
if not rec or rec.site ~= site then
  return { 'refused', REFUSED_NOT_FOUND }
end
if rec.state ~= STATE_AWAITING_PAYLOAD then
  return { 'refused', REFUSED_TOO_LATE, rec.state }
end
-- Sealed to an earlier holder: the current one could never open it (D11).
if not holder_key_is(rec, recipient) then
  return { 'refused', REFUSED_OTHER_DEVICE }
end
redis.call('HSET', K.payload, id, payload)
redis.call('ZREM', K.window, id)
redis.call('ZREM', K.awaiting, site_member(rec, id))
redis.call('ZADD', K.lease, rec.lexp, id)
rec.state = STATE_READY
rec.await = ''
save(id, rec)
return { 'ok' }
