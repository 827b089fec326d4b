-- settleGrants: decide the grants a held claim made (spec grants.md G-R18).
-- Each lease is resolved lease first among proto-2 jobs and acted on only
-- while it is the current grant of an unfinished job this runner holds:
-- granted ends the hold (the site lists the job, with a whole sealing
-- window from now); refused releases it as release does with reason
-- "refused"; returned releases it with a not-before for this runner.
-- A: runner, delay (the not-before delay in ms, '0' for none), granted
--    and refused (the counts of granted and refused pairs), then grants:
--    (job id, lease id) pairs from ARGV[A.grants] on, the granted, the
--    refused, then the returned.
-- Reply: {'ok', (job id, lease id) of each granted grant still current, in
-- request order...}.
-- Re-run: answers alike and keeps no memo. A granted job is no longer held,
-- so it is answered again while current and its window is not restarted;
-- a refused or returned one was requeued, so its lease is no longer this
-- runner's current grant and nothing is done (a refused runner cannot
-- claim it again, a returned one not before the delay).
local now = clock_now()
local runner, delay = A.runner, tonumber(A.delay)
local granted, refused = tonumber(A.granted), tonumber(A.refused)

local out = { 'ok' }
local n = 0
each_grant(now, '2', '', runner, A.grants, function(id, key, rec)
  n = n + 1
  if not rec or rec.state == STATE_DONE then
    return
  end
  if n <= granted then
    if is_held(key, rec) then
      unhold(key, rec, now)
    end
    out[#out + 1] = id
    out[#out + 1] = ARGV[A.grants + 2 * n - 1]
    return
  end
  if n <= granted + refused then
    if not refused_by(rec, runner) then
      rec.refused[#rec.refused + 1] = runner -- filed in K.refusals by requeue
    end
  elseif delay > 0 then
    set_not_before(rec, runner, now + delay)
  end
  requeue(key, rec, now)
end)
return out
