-- result: record a job's result once, under the current grant.
-- ARGV: job id, runner, lease id, result JSON, disposition, touch '1'|'0'
-- (stamp the runner's presence first, whatever the outcome), the result's
-- sender key id.
-- Reply: {'ok', duplicate '1'|'0'} or {'refused', code}.
-- Re-run: the job is done under the same grant, so the re-run is a
-- duplicate and overwrites nothing.
local now = clock_now()
local id, runner, lease, result, disposition, sender = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[7]
local rec, refusal = held_touching(id, runner, lease, ARGV[6], now)
if not rec then
  return refusal
end
-- Sealed by another device than the holder: no site could verify it.
if not holder_key_is(rec, sender) then
  return { 'refused', REFUSED_OTHER_DEVICE }
end
if rec.state == STATE_DONE then
  return { 'ok', '1' }
end
-- Leave the sealing-window and lease indexes: a done job is never requeued.
redis.call('ZREM', K.window, id)
redis.call('ZREM', K.lease, id)
redis.call('ZREM', K.awaiting, site_member(rec, id))
redis.call('ZREM', K.cancels, runner_member(rec, id))
redis.call('HSET', K.result, id, result)
redis.call('ZADD', K.finished, 0, site_member(rec, id))
rec.state = STATE_DONE
rec.await = ''
rec.disp = disposition
save(id, rec)
return { 'ok', '0' }
