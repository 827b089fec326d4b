-- release: give back the grants a runner names; reason "refused" also bars
-- the runner from the job, and a not-before delay bars it until then on
-- the store clock. Done jobs are skipped (relayd G10).
-- A: runner, reason, proto, site ('' resolves lease first), delay (ms,
--    '0' for none), touch '1'|'0' (stamp the runner's presence first),
--    then grants: (job id, lease id) pairs from ARGV[A.grants] on.
-- Reply: {'ok', released ids in request order...}; a grant whose record
-- this code cannot read is skipped, and nothing else of the call is held
-- back by it.
-- Re-run: the answer is remembered (answer_once); unremembered, a
-- released job would no longer carry the named grant and be left out.
local now = clock_now()
local runner, reason, delay = A.runner, A.reason, tonumber(A.delay)
if A.touch == '1' then
  stamp_presence(runner, now)
end

local out = { 'ok' }
each_grant(now, A.proto, A.site, runner, A.grants, function(id, key, rec)
  if not rec or rec.state == STATE_DONE then
    return
  end
  if reason == 'refused' and not refused_by(rec, runner) then
    rec.refused[#rec.refused + 1] = runner -- filed in K.refusals by requeue
  end
  if delay > 0 then
    set_not_before(rec, runner, now + delay)
  end
  requeue(key, rec, now)
  out[#out + 1] = id
end)
return out
