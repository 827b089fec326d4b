-- Section 30, the indexes: loading and saving job records, the results
-- journal and listing marks, and the members a job keeps in each index
-- (queue, awaiting, refusals, sticky re-offers, route counts, the holder's
-- returning list). It uses the codec (section 20).

-- version_number is the count a results version or change mark starts
-- with, or nil for a value no relay wrote.
local function version_number(v)
  return tonumber(string.match(v or '', '^%d+'))
end

-- journal_prefix names one site's list of live entries ('l') or
-- tombstones ('t') in K.changes.
local function journal_prefix(kind, site)
  return list_prefix(kind .. site)
end

-- journal_trim keeps at most max(1024, listed jobs) tombstones of a site,
-- the oldest going first; the horizon ('h|' .. site) moves past each one
-- dropped, so a replica whose listing is older reads it whole again.
local function journal_trim(site)
  local prefix = journal_prefix('t', site)
  local lo, hi = lex_range(prefix)
  local flo, fhi = lex_range(list_prefix(site))
  local keep = math.max(1024, redis.call('ZLEXCOUNT', K.finished, flo, fhi))
  local extra = redis.call('ZLEXCOUNT', K.changes, lo, hi) - keep
  if extra <= 0 then
    return
  end
  for _, m in ipairs(redis.call('ZRANGEBYLEX', K.changes, lo, hi, 'LIMIT', 0, math.min(extra, 2))) do
    redis.call('ZREM', K.changes, m)
    redis.call('HSET', K.listing, 'h|' .. site, tonumber(string.sub(m, #prefix + 1, #prefix + 16)))
  end
end

-- listing_changed records a change to what a site's results listing holds:
-- it moves the site's results version on and marks a still-listed job with
-- it, so a replica that cached the listing refetches only marked-anew jobs.
-- The version carries the server time beside its count, so a version lost
-- in a failover is never reissued for other contents. Each change is also
-- journalled in K.changes, by version number, so that a replica holding
-- the listing at an earlier version reads what changed since, not every
-- id: a live entry per listed job (its latest change) and a tombstone per
-- job gone. 'j|' .. site is the last version the journal holds; when it is
-- not the site's version, a relay that keeps no journal changed the
-- listing, and the horizon ('h|' .. site) moves up to there. old is the
-- job's mark before the change (read here for a listed job).
local function listing_changed(site, key, listed, old)
  local field = 'v|' .. site
  local n = version_number(redis.call('HGET', K.listing, field)) or 0
  if (tonumber(redis.call('HGET', K.listing, 'j|' .. site)) or 0) ~= n then
    redis.call('HSET', K.listing, 'h|' .. site, n)
  end
  local t = redis.call('TIME')
  local v = (n + 1) .. '.' .. t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('HSET', K.listing, field, v, 'j|' .. site, n + 1)
  if listed then
    old = redis.call('HGET', K.listing, key)
  end
  local was = version_number(old)
  if was then
    redis.call('ZREM', K.changes, journal_prefix('l', site) .. seq16(was) .. key)
  end
  if listed then
    redis.call('HSET', K.listing, key, v)
    redis.call('ZADD', K.changes, 0, journal_prefix('l', site) .. seq16(n + 1) .. key)
  else
    redis.call('ZADD', K.changes, 0, journal_prefix('t', site) .. seq16(n + 1) .. key)
    journal_trim(site)
  end
end

-- save stores a job record; every change to a done job's record is a
-- change to its site's results listing.
local function save(key, rec)
  redis.call('HSET', K.job, key, encode_job(rec))
  if rec.state == STATE_DONE then
    listing_changed(rec.site, key, true)
  end
end

-- load returns the job record and a word: 'ok', 'missing' or 'unreadable'.
local function load(key)
  local raw = redis.call('HGET', K.job, key)
  if not raw then
    return nil, 'missing'
  end
  local rec = decode_job(raw)
  if not rec then
    return nil, 'unreadable'
  end
  return rec, 'ok'
end

local function unreadable(key)
  return redis.error_reply('RELAYD-UNREADABLE job record ' .. bare_id(key) .. ' is not in a format this relay reads')
end

local function site_member(rec, key)
  return list_prefix(rec.site) .. seq16(rec.seq) .. key
end

-- runner_member files a held job in its holder's cancel list, one list per
-- protocol, since each protocol's daemon asks only for its own.
local function runner_member(rec, key)
  return list_prefix(rec.proto .. rec.runner) .. seq16(rec.seq) .. key
end

local function id_member(rec, key)
  return list_prefix(bare_id(key)) .. seq16(rec.seq) .. key
end

local function route_of(rec)
  return lenc(rec.site) .. rec.jowner
end

-- refused_by says whether runner refused the job.
local function refused_by(rec, runner)
  for _, r in ipairs(rec.refused) do
    if r == runner then
      return true
    end
  end
  return false
end

-- sticky_for names the one runner a queued job is offered to (D8): the
-- proto-2 job's re-offer runner, until its re-offer window ends or it
-- refuses the job; nil when anyone may have it.
local function sticky_for(rec, now)
  if rec.proto ~= '2' or rec.reoffer == '' or (tonumber(rec.runtil) or 0) <= now then
    return nil
  end
  if refused_by(rec, rec.reoffer) then
    return nil
  end
  return rec.reoffer
end

-- not_before reads the runner's not-before time on the job (0 when none).
local function not_before(rec, runner)
  if rec.retry == '' then
    return 0
  end
  local f = unframe(rec.retry) or {}
  for i = 1, #f - 1, 2 do
    if f[i] == runner then
      return tonumber(f[i + 1]) or 0
    end
  end
  return 0
end

local function set_not_before(rec, runner, at)
  local f = unframe(rec.retry) or {}
  local out = {}
  for i = 1, #f - 1, 2 do
    if f[i] ~= runner then
      out[#out + 1] = f[i]
      out[#out + 1] = f[i + 1]
    end
  end
  out[#out + 1] = runner
  out[#out + 1] = ms(at)
  rec.retry = frame(out)
end

-- refusal_member files a refusal next to the runner's other refusals in the
-- same queue, in queue order, so a claim can step over them cheaply.
local function refusal_member(runner, rec)
  return lenc(runner) .. rec.qm
end

-- route_field names a route's queues of one protocol in K.qcount: the
-- start their queue prefixes share.
local function route_field(proto, site, owner)
  return lenc(proto) .. lenc(site) .. lenc(owner)
end

-- route_size counts the entries of a route's queues in K.queue, in
-- O(log N).
local function route_size(field)
  return redis.call('ZLEXCOUNT', K.queue, '[' .. field, '[' .. field .. '\255')
end

-- set_count records a route's count, and with it whether the route is in
-- K.busy: a count above 0 puts it there, 0 takes it out. A count that
-- goes from above 1 to above 0 needs no visit, the route being there.
local function set_count(field, n)
  redis.call('HSET', K.qcount, field, n)
  if n > 0 then
    redis.call('SADD', K.busy, field)
  else
    redis.call('SREM', K.busy, field)
  end
end

-- lenc_fields_at returns the end of n lenc'd strings a member carries
-- from pos on, or nil.
local function lenc_fields_at(member, pos, n)
  local at = pos
  for _ = 1, n do
    local _, after = unlenc(member, at)
    if not after then
      return nil
    end
    at = after
  end
  return at
end

-- route_field_of is the route field a K.queue member starts with, or nil.
local function route_field_of(member)
  local at = lenc_fields_at(member, 1, 3)
  return at and string.sub(member, 1, at - 1)
end

-- route_from reads the route a K.qcount field names back, or nil.
local function route_from(field)
  local _, at = unlenc(field, 1)
  local site, after = unlenc(field, at or #field + 1)
  local owner, stop = unlenc(field, after or #field + 1)
  if not owner or stop ~= #field + 1 then
    return nil
  end
  return { site = site, owner = owner }
end

-- queue_count records that delta entries joined (or left) a route's queues
-- in K.queue, so a claim opens only the queues of routes that hold work.
-- Wherever a count comes to 1 or less it is taken again from the queues
-- themselves: queues filled before counts were kept are counted then, and
-- a count a claim reads as 0 is always exact. An entry joining always
-- (re)states the route busy: a relay that keeps counts but no K.busy may
-- have raised the count from 0 without saying so, and this is the first
-- write of ours to see the route since.
local function queue_count(field, delta)
  if redis.call('HINCRBY', K.qcount, field, delta) <= 1 then
    set_count(field, route_size(field))
  elseif delta > 0 then
    redis.call('SADD', K.busy, field)
  end
end

-- queue_in and queue_out put a job in its claim queue (or, while it is
-- re-offered to one runner, in that runner's sticky place) and take it
-- out, keeping K.refusals to exactly the refusals of jobs in K.queue: a
-- claim relies on every refusal it reads standing for an entry of the
-- queue. They keep the queue's count too.
local function queue_in(key, rec, now)
  local only = sticky_for(rec, now)
  if only then
    redis.call('ZADD', K.sticky, 0, lenc(only) .. rec.qm)
    redis.call('ZADD', K.reoffer, rec.runtil, key)
    return
  end
  if redis.call('ZADD', K.queue, 0, rec.qm) == 1 then
    queue_count(route_field(rec.proto, rec.site, rec.jowner), 1)
  end
  for _, r in ipairs(rec.refused) do
    redis.call('ZADD', K.refusals, 0, refusal_member(r, rec))
  end
end

local function queue_out(key, rec)
  if redis.call('ZREM', K.queue, rec.qm) == 1 then
    queue_count(route_field(rec.proto, rec.site, rec.jowner), -1)
  end
  for _, r in ipairs(rec.refused) do
    redis.call('ZREM', K.refusals, refusal_member(r, rec))
  end
  if rec.reoffer ~= '' then
    redis.call('ZREM', K.sticky, lenc(rec.reoffer) .. rec.qm)
    redis.call('ZREM', K.reoffer, key)
  end
end

-- await_in and await_out keep the indexes of a job awaiting its payload,
-- the per-route count of unsealed proto-2 grants (the cap) among them.
-- Every transition into or out of awaiting-payload goes through them. A
-- held job (hold true) is left out of its site's listing until
-- settleGrants lists it (unhold).
local function await_in(key, rec, hold)
  redis.call('ZADD', K.window, rec.await, key)
  if not hold then
    redis.call('ZADD', K.awaiting, 0, site_member(rec, key))
  end
  if rec.proto == '2' then
    redis.call('HINCRBY', K.unsealed, route_of(rec), 1)
  end
end

local function await_out(key, rec)
  if rec.state ~= STATE_AWAITING_PAYLOAD then
    return
  end
  redis.call('ZREM', K.window, key)
  redis.call('ZREM', K.awaiting, site_member(rec, key))
  if rec.proto == '2' and redis.call('HINCRBY', K.unsealed, route_of(rec), -1) <= 0 then
    redis.call('HDEL', K.unsealed, route_of(rec))
  end
end

-- is_held says whether an awaiting job is held by its claim (G-R16): it
-- awaits its payload but its site's listing does not show it.
local function is_held(key, rec)
  return rec.state == STATE_AWAITING_PAYLOAD and not redis.call('ZSCORE', K.awaiting, site_member(rec, key))
end

-- unhold ends a held job's hold at now: its site lists it, with a whole
-- sealing window from now.
local function unhold(key, rec, now)
  rec.await = ms(now + WINDOW_MS)
  redis.call('ZADD', K.window, rec.await, key)
  redis.call('ZADD', K.awaiting, 0, site_member(rec, key))
  save(key, rec)
end

-- A sealed job goes back to its holder (README D14): when a proto-2 job's
-- lease lapses with its payload sealed, the grant and the payload are
-- kept, the job waits in state ready on its holder's list in K.returning
-- until HOLDER_RETURN_MS after the lapse (its K.lease score), and the
-- holder's next claim re-grants it under the same lease id
-- (regrant_returning). Until then the lapsed lease acts on nothing
-- (resolve); past the window the job is requeued as before.
local function returning_member(rec, key)
  return list_prefix(rec.proto .. rec.runner) .. seq16(rec.seq) .. key
end

local function is_returning(key, rec)
  return rec.runner ~= '' and redis.call('ZSCORE', K.returning, returning_member(rec, key)) ~= false
end

local function returning_out(key, rec)
  if rec.runner ~= '' then
    redis.call('ZREM', K.returning, returning_member(rec, key))
  end
end

