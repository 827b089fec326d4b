-- result: record a job's result once, under the current grant.
-- A: id (the job's), runner, lease (its id), result (JSON), disposition,
-- touch '1'|'0' (stamp the runner's presence first, whatever the outcome),
-- sender (the result's sender key id), proto, site ('' resolves lease
-- first), sites: those whose jobs the holder may act on ('*' for any, else
-- framed ids: served_sites).
-- Reply: {'ok', duplicate '1'|'0'} or {'refused', code}.
-- Re-run: the answer is remembered (answer_once); unremembered, the job
-- would be done under the same grant and a re-run would answer duplicate.
local now = clock_now()
local id, runner, lease, result, disposition, sender = A.id, A.runner, A.lease, A.result, A.disposition, A.sender
local key, rec = held_touching(A.proto, A.site, id, runner, lease, A.touch, now, served_sites(A.sites))
if not key then
  return rec
end
-- Sealed by another device than the holder: no site could verify it.
if not holder_key_is(rec, sender) then
  return { 'refused', REFUSED_OTHER_DEVICE }
end
if rec.state == STATE_DONE then
  return { 'ok', '1' }
end
-- Leave the sealing-window and lease indexes: a done job is never
-- requeued. Its grant stays indexed, and a proto-2 holder is still told
-- of a cancel.
await_out(key, rec)
redis.call('ZREM', K.lease, key)
if rec.proto ~= '2' then
  redis.call('ZREM', K.cancels, runner_member(rec, key))
end
redis.call('HSET', K.result, key, result)
redis.call('ZADD', K.finished, 0, site_member(rec, key))
rec.state = STATE_DONE
rec.await = ''
rec.disp = disposition
save(key, rec)
return { 'ok', '0' }
