-- payload: store the payload of a job awaiting it; the job becomes ready
-- and its count of lapsed sealing windows starts again.
-- A: id (the job's), site, payload (JSON), recipient (the payload's
-- recipient key id).
-- Reply: {'ok'} or {'refused', code[, state]}.
-- Re-run: the answer is remembered (answer_once); unremembered, the job
-- would no longer be awaiting and a re-run would be refused as too-late.
local now = clock_now()
local id, site, payload, recipient = A.id, A.site, A.payload, A.recipient
local key = job_key(site, id)

local rec, how = live(key, now)
if how == 'unreadable' then
  return unreadable(key)
end
if not rec then
  return { 'refused', REFUSED_NOT_FOUND }
end
if rec.state ~= STATE_AWAITING_PAYLOAD then
  return { 'refused', REFUSED_TOO_LATE, rec.state }
end
-- Sealed to an earlier holder: the current one could never open it (D11).
if not holder_key_is(rec, recipient) then
  return { 'refused', REFUSED_OTHER_DEVICE }
end
redis.call('HSET', K.payload, key, payload)
await_out(key, rec)
redis.call('ZADD', K.lease, rec.lexp, key)
rec.state = STATE_READY
rec.await = ''
rec.attempts = ''
save(key, rec)
return { 'ok' }
