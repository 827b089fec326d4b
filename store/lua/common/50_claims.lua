-- Section 50, the holder's calls and the sweep: the sites a call serves,
-- held (the job a runner holds under a lease), unsticking re-offers, the
-- sweep of passed deadlines and the stub check a claim makes. It uses
-- sections 20 to 40.

-- served_sites reads a call's Sites argument: '*' for any site (nil), or
-- the framed ids of the only sites whose jobs the holder may still act on,
-- as a set (decision D12).
local function served_sites(raw)
  if raw == '*' then
    return nil
  end
  local set = {}
  for _, site in ipairs(unframe(raw) or {}) do
    set[site] = true
  end
  return set
end

-- withdrawn says whether rec is a job of a site outside sites
-- (served_sites), one the holder's owner no longer consents to.
local function withdrawn(rec, sites)
  return sites ~= nil and not sites[rec.site]
end

-- held returns the key and the live job that runner holds under lease, or
-- nil and the reply that refuses the call (unreadable record, not-found,
-- not-holder, stale-lease), in the reference's order, then withdrawn when
-- the job's site is not among sites (served_sites; nil asks nothing).
local function held(proto, site, id, runner, lease, now, sites)
  local key, rec, how = resolve(proto, site, id, runner, lease, now)
  if how == 'unreadable' then
    return nil, unreadable(key)
  end
  if not rec then
    return nil, { 'refused', REFUSED_NOT_FOUND }
  end
  local no = holder_refusal(rec, runner, lease)
  if no then
    return nil, { 'refused', no }
  end
  if withdrawn(rec, sites) then
    return nil, { 'refused', REFUSED_WITHDRAWN }
  end
  return key, rec
end

-- unstick puts a job whose re-offer window ended back in the open queue.
local function unstick(key, now)
  redis.call('ZREM', K.reoffer, key)
  local rec = load(key)
  if rec and rec.state == STATE_QUEUED and rec.cancelled ~= '1' then
    queue_out(key, rec)
    queue_in(key, rec, now)
  end
end

-- drop_queue_entries removes the claim-queue entries of a job whose record
-- raw this code cannot read, before the job is dropped: a refusal left
-- behind would break a claim's reliance on every refusal standing for a
-- queued job, and make it step over a job that runner never refused. The
-- entries are found without decoding the record: any framed field ending
-- in the job's sequence (from K.order) and key is its queue member, and
-- each field is tried as a runner under it, which removes nothing unless
-- that runner refused the job (or holds its re-offer). An unframed record
-- names nothing; the claims that meet its entries repair what they can.
local function drop_queue_entries(key, raw)
  local seq = redis.call('ZSCORE', K.order, key)
  local f = unframe(raw)
  if not seq or not f then
    return
  end
  local tail = seq16(seq) .. key
  for _, qm in ipairs(f) do
    if #qm > #tail and string.sub(qm, -#tail) == tail then
      redis.call('ZREM', K.queue, qm)
      for _, r in ipairs(f) do
        redis.call('ZREM', K.refusals, lenc(r) .. qm)
        redis.call('ZREM', K.sticky, lenc(r) .. qm)
      end
    end
  end
end

-- sweep applies the deadlines due at now, taking at most batch entries from
-- each deadline index and, when total is given, at most total in all. It
-- returns the requeued, the expired and the lapsed job ids (bare), each in
-- first-enqueue order, then how many entries it took (a claim's settle
-- budget counts them).
local function sweep(now, batch, total)
  local room = total or 4 * batch
  local function due_in(index)
    local n = math.min(batch, room)
    if n <= 0 then
      return {}
    end
    local keys = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, n)
    room = room - #keys
    return keys
  end
  local unstuck = due_in(K.reoffer)
  for _, key in ipairs(unstuck) do
    unstick(key, now)
  end
  local due, seen = {}, {}
  for _, index in ipairs({ K.deadline, K.window, K.lease }) do
    local keys = due_in(index)
    for _, key in ipairs(keys) do
      if not seen[key] then
        seen[key] = true
        due[#due + 1] = { key = key, seq = tonumber(redis.call('ZSCORE', K.order, key)) or 0 }
      end
    end
  end
  table.sort(due, function(a, b)
    if a.seq ~= b.seq then
      return a.seq < b.seq
    end
    return a.key < b.key
  end)
  local requeued, expired, lapsed = {}, {}, {}
  for _, d in ipairs(due) do
    local id = bare_id(d.key)
    local rec, how = load(d.key)
    if rec then
      local out = settle(d.key, rec, now)
      if out == 'gone' or out == 'evicted' then
        expired[#expired + 1] = id
      elseif out == 'requeued' or out == 'lapsed' then
        requeued[#requeued + 1] = id
      end
      if out == 'evicted' or out == 'lapsed' then
        lapsed[#lapsed + 1] = id
      end
    elseif how == 'unreadable' then
      -- Only the deadline is enforced on a record this code cannot read;
      -- its other index entries are dropped so they cannot stall the sweep.
      local dl = tonumber(redis.call('ZSCORE', K.deadline, d.key))
      if dl and dl <= now then
        drop_queue_entries(d.key, redis.call('HGET', K.job, d.key))
        drop(d.key, nil)
        expired[#expired + 1] = id
      else
        redis.call('ZREM', K.window, d.key)
        redis.call('ZREM', K.lease, d.key)
      end
    else
      -- An index entry without a job: repair.
      drop(d.key, nil)
    end
  end
  return requeued, expired, lapsed, #unstuck + #due
end

-- valid_stub says whether a stored stub would decode as the JobStub it was
-- written as (its fields by type: STUB_STRINGS, STUB_OPTIONAL_STRINGS,
-- STUB_BOOLS, STUB_INTS); a claim hands out nothing else.
local function valid_stub(raw, id)
  local ok, v = pcall(cjson.decode, raw)
  if not ok or type(v) ~= 'table' then
    return false
  end
  for _, f in ipairs(STUB_STRINGS) do
    if type(v[f]) ~= 'string' then
      return false
    end
  end
  for _, f in ipairs(STUB_OPTIONAL_STRINGS) do
    if v[f] ~= nil and type(v[f]) ~= 'string' then
      return false
    end
  end
  for _, f in ipairs(STUB_BOOLS) do
    if type(v[f]) ~= 'boolean' then
      return false
    end
  end
  for _, f in ipairs(STUB_INTS) do
    local d = v[f]
    if type(d) ~= 'number' or d ~= math.floor(d) or d <= -2 ^ 63 or d >= 2 ^ 63 then
      return false
    end
  end
  return v.id == id
end

