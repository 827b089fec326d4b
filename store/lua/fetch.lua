-- fetch: hand the sealed payload to the job's holder and mark the
-- job running.
-- A: id (the job's), runner, lease (its id), touch '1'|'0' (stamp the
-- runner's presence first, whatever the outcome), proto, site ('' resolves
-- lease first), sites: those whose jobs the holder may act on ('*' for
-- any, else framed ids: served_sites).
-- Reply: {'ok', payload JSON} or {'refused', code}.
-- Re-run: a running job stays running and the same payload comes back.
local now = clock_now()
local id, runner, lease = A.id, A.runner, A.lease
local key, rec = held_touching(A.proto, A.site, id, runner, lease, A.touch, now, served_sites(A.sites))
if not key then
  return rec
end
-- A finished job is never reopened (relayd G9). Proto 0 says so first;
-- proto 2 asks for the payload first (ST9), so a job finished without one
-- is not-ready (S15).
local payload = redis.call('HGET', K.payload, key)
if rec.proto == '0' and rec.state == STATE_DONE then
  return { 'refused', REFUSED_FINISHED }
end
if not payload then
  return { 'refused', REFUSED_NOT_READY }
end
if rec.state ~= STATE_READY and rec.state ~= STATE_RUNNING then
  return { 'refused', REFUSED_FINISHED }
end
if rec.state ~= STATE_RUNNING then
  rec.state = STATE_RUNNING
  save(key, rec)
end
return { 'ok', payload }
