-- Section 80, migration: moving the jobs an older relay left in the
-- format-"1" keyspace (K.old_*) into this one (migrate_legacy). It uses
-- the codec and the indexes (sections 20 and 30).

-- legacy_entries lists the format-"1" index entries of an old record
-- (keyed by bare id), so that moving it leaves none behind.
local function legacy_entries(id, rec)
  local site = list_prefix(rec.site) .. seq16(rec.seq) .. id
  local out = { { K.old_queue, rec.qm }, { K.old_awaiting, site }, { K.old_finished, site } }
  for _, r in ipairs(rec.refused) do
    out[#out + 1] = { K.old_refusals, lenc(r) .. rec.qm }
  end
  if rec.runner ~= '' then
    out[#out + 1] = { K.old_cancels, list_prefix(rec.runner) .. seq16(rec.seq) .. id }
  end
  return out
end

-- adopt files a job record moved from the old keyspace in every index its
-- state puts it in, as the operations that led there would have.
local function adopt(key, rec, now)
  redis.call('ZADD', K.order, rec.seq, key)
  redis.call('ZADD', K.deadline, rec.deadline, key)
  redis.call('ZADD', K.byid, 0, id_member(rec, key))
  if rec.runner ~= '' then
    redis.call('HSET', K.leases, rec.lease, key)
    if rec.cancelled == '1' and rec.state ~= STATE_DONE then
      redis.call('ZADD', K.cancels, 0, runner_member(rec, key))
    end
  end
  if rec.state == STATE_QUEUED then
    if rec.cancelled ~= '1' then
      queue_in(key, rec, now)
    end
  elseif rec.state == STATE_AWAITING_PAYLOAD then
    await_in(key, rec)
  elseif rec.state == STATE_DONE then
    redis.call('ZADD', K.finished, 0, site_member(rec, key))
  else
    redis.call('ZADD', K.lease, rec.lexp, key)
  end
  save(key, rec)
end

-- legacy_queue reads the job owner, kind and owner-only class from a
-- format-"1" queue member: lenc(site) lenc(owner) lenc(kind) class '|' ...
local function legacy_queue(qm)
  local _, p1 = unlenc(qm, 1)
  local owner, p2 = unlenc(qm, p1 or #qm + 1)
  local kind, p3 = unlenc(qm, p2 or #qm + 1)
  if not owner or not kind then
    return nil
  end
  return owner, kind, string.sub(qm, p3, p3) == 's'
end

-- migrate_legacy moves up to batch jobs that a relay of format "1" left
-- under bare ids into this keyspace as proto-0 jobs of their site, with
-- their grant, payload and result, so a rolling upgrade strands none. A
-- record neither format reads keeps only its old deadline.
local function migrate_legacy(now, batch)
  for _, id in ipairs(redis.call('ZRANGE', K.old_order, 0, batch - 1)) do
    redis.call('ZREM', K.old_order, id)
    local rec, f = read_record(redis.call('HGET', K.old_job, id), LEGACY_FORMAT, #LEGACY_FIELDS, LEGACY_FIELDS_record)
    local owner, kind, only
    if rec and is_int(rec.seq) and is_int(rec.deadline) then
      owner, kind, only = legacy_queue(rec.qm)
    end
    if owner then
      rec.refused = {}
      for i = #LEGACY_FIELDS + 1, #f do
        rec.refused[#rec.refused + 1] = f[i]
      end
      for _, e in ipairs(legacy_entries(id, rec)) do
        redis.call('ZREM', e[1], e[2])
      end
      redis.call('ZREM', K.old_deadline, id)
      redis.call('ZREM', K.old_window, id)
      redis.call('ZREM', K.old_lease, id)
      local payload = redis.call('HGET', K.old_payload, id)
      local result = redis.call('HGET', K.old_result, id)
      redis.call('HDEL', K.old_job, id)
      redis.call('HDEL', K.old_payload, id)
      redis.call('HDEL', K.old_result, id)
      local key = job_key(rec.site, id)
      if not redis.call('HGET', K.job, key) then
        rec.proto, rec.jowner, rec.attempts, rec.reoffer, rec.runtil, rec.retry = '0', owner, '', '', '', ''
        rec.qm = queue_prefix('0', rec.site, owner, kind, only) .. seq16(rec.seq) .. key
        if payload then
          redis.call('HSET', K.payload, key, payload)
        end
        if result then
          redis.call('HSET', K.result, key, result)
        end
        adopt(key, rec, now)
      end
    end
  end
end

