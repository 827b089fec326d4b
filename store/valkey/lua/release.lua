-- release: give back the grants a runner names; reason "refused" also bars
-- the runner from the job. Done jobs are skipped (relayd G10).
-- ARGV: runner, reason, then (job id, lease id) pairs.
-- Reply: {'ok', released ids in request order...}.
-- Re-run: a released job no longer carries the named grant, so it is
-- skipped.
local now = clock_now()
local runner, reason = ARGV[1], ARGV[2]

local out = { 'ok' }
local stop = each_grant(now, runner, function(id, rec)
  if not rec or rec.state == STATE_DONE then
    return
  end
  if reason == 'refused' then
    local already = false
    for _, r in ipairs(rec.refused) do
      if r == runner then
        already = true
      end
    end
    if not already then
      rec.refused[#rec.refused + 1] = runner -- filed in K.refusals by requeue
    end
  end
  requeue(id, rec)
  out[#out + 1] = id
end)
return stop or out
