-- fetch: hand the sealed payload to the job's holder and mark the
-- job running.
-- ARGV: job id, runner, lease id, touch '1'|'0' (stamp the runner's
-- presence first, whatever the outcome).
-- Reply: {'ok', payload JSON} or {'refused', code}.
-- Re-run: a running job stays running and the same payload comes back.
local now = clock_now()
local id, runner, lease = ARGV[1], ARGV[2], ARGV[3]
local rec, refusal = held_touching(id, runner, lease, ARGV[4], now)
if not rec then
  return refusal
end
if rec.state == STATE_DONE then
  return { 'refused', REFUSED_FINISHED } -- relayd G9: a finished job is never reopened
end
local payload = redis.call('HGET', K.payload, id)
if not payload then
  return { 'refused', REFUSED_NOT_READY }
end
if rec.state ~= STATE_RUNNING then
  rec.state = STATE_RUNNING
  save(id, rec)
end
return { 'ok', payload }
