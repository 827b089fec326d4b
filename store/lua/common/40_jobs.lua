-- Section 40, the job lifecycle: dropping, requeueing, lapsing and settling
-- a job, live (a record with its passed deadlines applied), resolve (a job
-- and lease a call names) and the holder's checks. It uses the codec and
-- the indexes (sections 20 and 30).

-- hold_for_holder starts the holder's window of a ready or running job
-- whose lease lapsed, when it may have one: proto 2, payload sealed, not
-- cancelled, not already in a window (whose end this lapse is), and not
-- lapsed so long ago that the window is over. It says whether it did.
local function hold_for_holder(key, rec, now)
  local lexp = tonumber(rec.lexp) or 0
  if rec.proto ~= '2' or rec.cancelled == '1' or lexp + HOLDER_RETURN_MS <= now
      or is_returning(key, rec) or redis.call('HEXISTS', K.payload, key) == 0 then
    return false
  end
  rec.state = STATE_READY
  rec.lexp = ms(lexp + HOLDER_RETURN_MS)
  save(key, rec)
  redis.call('ZADD', K.lease, rec.lexp, key)
  redis.call('ZADD', K.returning, 0, returning_member(rec, key))
  return true
end

-- drop deletes a job with everything it holds, payload and result included.
-- rec may be nil for a record this code cannot read: the key-named
-- entries go, and a stale lex entry left behind is cleaned up by whoever
-- meets it.
local function drop(key, rec)
  redis.call('HDEL', K.job, key)
  redis.call('HDEL', K.payload, key)
  redis.call('HDEL', K.result, key)
  redis.call('ZREM', K.order, key)
  redis.call('ZREM', K.deadline, key)
  redis.call('ZREM', K.window, key)
  redis.call('ZREM', K.lease, key)
  redis.call('ZREM', K.reoffer, key)
  local mark = redis.call('HGET', K.listing, key)
  if mark then
    redis.call('HDEL', K.listing, key)
    listing_changed(unlenc(key, 1), key, false, mark)
  end
  if rec then
    await_out(key, rec)
    queue_out(key, rec)
    redis.call('ZREM', K.finished, site_member(rec, key))
    redis.call('ZREM', K.byid, id_member(rec, key))
    if rec.runner ~= '' then
      returning_out(key, rec)
      redis.call('ZREM', K.cancels, runner_member(rec, key))
      redis.call('HDEL', K.leases, rec.lease)
    end
  end
end

-- requeue puts a job back in its queue at its original place, dropping the
-- grant and the payload but keeping refusals, cancellation, any result and
-- the proto-2 bookkeeping. A cancelled job stays out of the queue: it is
-- never offered again.
local function requeue(key, rec, now)
  await_out(key, rec)
  returning_out(key, rec)
  redis.call('ZREM', K.lease, key)
  if rec.runner ~= '' then
    redis.call('ZREM', K.cancels, runner_member(rec, key))
    redis.call('HDEL', K.leases, rec.lease)
  end
  redis.call('HDEL', K.payload, key)
  rec.state = STATE_QUEUED
  rec.runner, rec.cowner, rec.device, rec.lease, rec.lexp, rec.await = '', '', '', '', '', ''
  if rec.cancelled ~= '1' then
    queue_in(key, rec, now)
  end
  save(key, rec)
end

-- lapse applies a proto-2 job's passed sealing window (spec protocol-2
-- §4.5): the first runner to let one lapse is the one it is re-offered to,
-- for one window after each lapse of its own grant (D8); the third lapse
-- in a row evicts it. It returns 'evicted' or 'lapsed'.
local function lapse(key, rec, now)
  if rec.reoffer == '' then
    rec.reoffer = rec.runner
  end
  if rec.reoffer == rec.runner then
    rec.runtil = ms(tonumber(rec.await) + WINDOW_MS)
  end
  local attempts = (tonumber(rec.attempts) or 0) + 1
  if attempts >= SEAL_ATTEMPTS then
    drop(key, rec)
    return 'evicted'
  end
  rec.attempts = ms(attempts)
  requeue(key, rec, now)
  return 'lapsed'
end

-- settle applies a job's passed deadlines at now (relayd G8): past its
-- deadline the job is deleted; past its sealing window, or past its lease
-- while ready or running, it goes back to the queue (a proto-2 lapse is
-- counted and may evict it). Bounds are inclusive. It returns 'gone',
-- 'evicted', 'lapsed', 'requeued' or 'live'.
local function settle(key, rec, now)
  if tonumber(rec.deadline) <= now then
    drop(key, rec)
    return 'gone'
  end
  if rec.state == STATE_AWAITING_PAYLOAD then
    if (tonumber(rec.await) or 0) <= now then
      -- A held job's site never saw it: its lapse is a plain requeue.
      if rec.proto == '2' and not is_held(key, rec) then
        return lapse(key, rec, now)
      end
      requeue(key, rec, now)
      return 'requeued'
    end
  elseif (rec.state == STATE_READY or rec.state == STATE_RUNNING) and rec.runner ~= '' then
    if (tonumber(rec.lexp) or 0) <= now then
      if hold_for_holder(key, rec, now) then
        return 'live'
      end
      requeue(key, rec, now)
      return 'requeued'
    end
  end
  return 'live'
end

-- settle_due says whether settle would change the job at now: whether one
-- of the deadlines settle applies has passed.
local function settle_due(rec, now)
  if tonumber(rec.deadline) <= now then
    return true
  end
  if rec.state == STATE_AWAITING_PAYLOAD then
    return (tonumber(rec.await) or 0) <= now
  end
  if (rec.state == STATE_READY or rec.state == STATE_RUNNING) and rec.runner ~= '' then
    return (tonumber(rec.lexp) or 0) <= now
  end
  return false
end

-- settled settles a loaded job and returns it, or nil when it is gone.
local function settled(key, rec, now)
  local out = settle(key, rec, now)
  if out == 'gone' or out == 'evicted' then
    return nil
  end
  return rec
end

-- live loads a job and settles it: it returns the record, or nil and
-- 'missing' (absent or just dropped) or 'unreadable'.
local function live(key, now)
  local rec, how = load(key)
  if not rec then
    return nil, how
  end
  rec = settled(key, rec, now)
  if not rec then
    return nil, 'missing'
  end
  return rec, 'ok'
end

-- resolve finds the live job a holder-scoped call of a protocol names,
-- settling each job it considers. With a site it is (site, id). Without
-- one it is lease first (spec protocol-2 §4.1 R4.1.3): the job whose
-- current grant is lease, if its id is id; else the first job with that id
-- this runner holds, among as many jobs as sites use the id. It returns
-- the key, the record (nil for none) and a word as load does.
local function resolve(proto, site, id, runner, lease, now)
  if site ~= '' then
    local key = job_key(site, id)
    local rec, how = live(key, now)
    if rec and (rec.proto ~= proto or is_returning(key, rec)) then
      return key, nil, 'missing'
    end
    return key, rec, how
  end
  local key = redis.call('HGET', K.leases, lease)
  if key and bare_id(key) == id then
    local rec, how = load(key)
    if how == 'unreadable' then
      return key, nil, how
    end
    if rec and rec.proto == proto and settled(key, rec, now) and redis.call('HGET', K.leases, lease) == key
        and not is_returning(key, rec) then
      return key, rec, 'ok'
    end
  end
  local prefix = list_prefix(id)
  local lo, hi = lex_range(prefix)
  for _, member in ipairs(redis.call('ZRANGEBYLEX', K.byid, lo, hi)) do
    local k = string.sub(member, #prefix + 17)
    local rec = load(k)
    if rec and rec.proto == proto and settled(k, rec, now) and rec.runner == runner and not is_returning(k, rec) then
      return k, rec, 'ok'
    end
  end
  return job_key(site, id), nil, 'missing'
end

-- regrant_returning re-grants to runner, on the very device the payload
-- was sealed to, up to max of the jobs on its returning list (D14) that
-- are still live and on a route the claim names (K.routes): the same lease
-- id, expiring lease_ms from now, still ready. It returns the flat
-- {stub, lease id, expiresAt...} of the grants.
local function regrant_returning(runner, device, lease_ms, max, now)
  local out = {}
  local prefix = list_prefix('2' .. runner)
  local lo, hi = lex_range(prefix)
  for _, member in ipairs(redis.call('ZRANGEBYLEX', K.returning, lo, hi)) do
    if #out / 3 >= max then
      break
    end
    local key = string.sub(member, #prefix + 17)
    local rec = live(key, now)
    if rec and is_returning(key, rec) and rec.state == STATE_READY and rec.device == device and rec.cancelled ~= '1'
        and redis.call('SISMEMBER', K.routes, route_field(rec.proto, rec.site, rec.jowner)) == 1 then
      returning_out(key, rec)
      rec.lexp = ms(now + lease_ms)
      save(key, rec)
      redis.call('ZADD', K.lease, rec.lexp, key)
      out[#out + 1] = rec.stub
      out[#out + 1] = rec.lease
      out[#out + 1] = rec.lexp
    end
  end
  return out
end

-- holder_refusal checks a grant in the reference's order: not-holder covers
-- an unclaimed job, then the lease id must match.
local function holder_refusal(rec, runner, lease)
  if rec.runner == '' or rec.runner ~= runner then
    return REFUSED_NOT_HOLDER
  end
  if rec.lease ~= lease then
    return REFUSED_STALE_LEASE
  end
  return nil
end

-- holder_key_is says whether kid is the key id of the device holding rec's
-- grant, as the claim stored it beside the device's keys. A grant stored
-- before key ids were kept has none and is not second-guessed.
local function holder_key_is(rec, kid)
  local ok, dev = pcall(cjson.decode, rec.device)
  if not ok or type(dev) ~= 'table' then
    return false
  end
  return dev[DEVICE_KEY_ID] == nil or dev[DEVICE_KEY_ID] == kid
end

