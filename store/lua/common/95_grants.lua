-- Section 95, a runner's grants: the cancellation requests it is sent
-- and the renewal of the leases it holds. It uses sections 20 to 70.

-- cancel_requests lists, flat (job id, lease id), the grants of the
-- cancelled jobs of proto the runner holds, in first-enqueue order,
-- applying each one's passed deadlines first (those of its other
-- protocol's list too, so that every store settles the same jobs in the
-- same call). Proto 0 leaves finished jobs out (design G11); proto 2
-- lists them (spec protocol-2 ST14).
local function cancel_requests(now, runner, proto)
  local out = {}
  for _, p in ipairs({ '0', '2' }) do
    local prefix = list_prefix(p .. runner)
    local lo, hi = lex_range(prefix)
    for _, member in ipairs(redis.call('ZRANGEBYLEX', K.cancels, lo, hi)) do
      local key = id_of(member, prefix)
      local rec, how = live(key, now)
      if how ~= 'unreadable' then
        if rec and rec.runner == runner and rec.cancelled == '1' and (rec.state ~= STATE_DONE or p == '2')
            and runner_member(rec, key) == member then
          if p == proto then
            out[#out + 1] = bare_id(key)
            out[#out + 1] = rec.lease
          end
        else
          -- No longer this runner's to stop (finished, requeued, dropped or
          -- a new job under the key); a cancelled job is never granted
          -- again, so the entry cannot come back to life.
          redis.call('ZREM', K.cancels, member)
        end
      end
    end
  end
  return out
end

-- renew_grants extends each grant named in ARGV from index first on (job
-- id, lease id pairs) that the runner still holds to now + lease_ms,
-- whatever the job's state; the sealing window is never extended. It
-- returns, flat and in request order, [job id, 'renewed'|'lost',
-- expiresAt|'']; a grant whose record this code cannot read is lost, and
-- nothing else of the call is held back by it. A grant on a job of a site
-- outside sites (served_sites; nil for any) is lost and left to lapse.
local function renew_grants(now, runner, lease_ms, proto, site, first, sites)
  local out = {}
  each_grant(now, proto, site, runner, first, function(id, key, rec)
    if not rec or withdrawn(rec, sites) then
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
  return out
end
