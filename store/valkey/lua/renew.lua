-- renew: extend each named grant the runner still holds to now + leaseMs,
-- whatever the job's state. The sealing window is never extended.
-- ARGV: runner, leaseMs, proto, site ('' resolves lease first), then
--       (job id, lease id) pairs.
-- Reply: {'ok', framed [job id, 'renewed'|'lost', expiresAt|'']...}; a
-- grant whose record this code cannot read is lost, and nothing else of
-- the call is held back by it.
-- Re-run: the answer is remembered (answer_once), so a re-run neither
-- moves an expiry again nor changes its answer.
local now = clock_now()
local runner, lease_ms = ARGV[1], tonumber(ARGV[2])
local out = {}
each_grant(now, ARGV[3], ARGV[4], runner, 5, function(id, key, rec)
  if not rec then
    out[#out + 1] = id
    out[#out + 1] = 'lost'
    out[#out + 1] = ''
    return
  end
  rec.lexp = ms(now + lease_ms)
  save(key, rec)
  if rec.state == STATE_READY or rec.state == STATE_RUNNING then
    redis.call('ZADD', K.lease, rec.lexp, key)
  end
  out[#out + 1] = id
  out[#out + 1] = 'renewed'
  out[#out + 1] = rec.lexp
end)
return { 'ok', frame(out) }
