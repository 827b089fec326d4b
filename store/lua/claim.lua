-- claim: sweep what is due, then grant up to max queued jobs of one
-- protocol in first-enqueue order across the queues the routes and kinds
-- allow. Proto 2 also keeps at most UNSEALED_PER_ROUTE grants of a route
-- awaiting their payload (a capped route's queues are not read) and offers
-- a re-offered job only to its runner (from that runner's sticky place, so
-- jobs held back for others cost nothing). Both protocols honour
-- not-before times, set by a release that names a delay.
-- A: runner, owner, device (JSON), lease_ms, window_ms (the sealing
--    window), max, settle_budget, touch '1'|'0' (stamp the runner's
--    presence, whatever is granted), proto, has_routes '1'|'0' (routes
--    named: K.routes holds their route fields), hold '1'|'0' (keep the
--    grants out of the listing until settleGrants, G-R16), kinds (a
--    list), then leases: one fresh lease id per possible grant, from
--    ARGV[A.leases] on.
-- Reply: {'ok', framed [stub, lease id, expiresAt]...}, or the error
-- NOROUTES, before anything is done (claimFirst in routes.go, the
-- claim's prelude in ops.go, runs before the admission), when routes are
-- named and K.routes is gone: the caller stores them again (routes.lua)
-- and re-runs.
-- Re-run: the answer is remembered (answer_once); a re-run returns it and
-- grants nothing more.
local now = clock_now()
local runner, owner, device = A.runner, A.owner, A.device
local lease_ms = tonumber(A.lease_ms)
local window_ms = tonumber(A.window_ms)
local max = tonumber(A.max)
local settle_budget = tonumber(A.settle_budget)
if A.touch == '1' then
  stamp_presence(runner, now)
end
local proto = A.proto
local has_routes = A.has_routes == '1'
local hold = A.hold == '1'
local kinds = A.kinds
local leases = {}
for i = A.leases, #ARGV do
  leases[#leases + 1] = ARGV[i]
end
if max > #leases then
  max = #leases
end

-- The settle budget bounds the expired work one claim takes on, however
-- large a backlog: the sweep share takes at most half of it, the jobs the
-- claim steps over the rest. What is left over is the background
-- sweeper's.
local share = math.floor(settle_budget / 2)
local _, _, _, swept = sweep(now, share, share)
local settles = settle_budget - swept

-- unsealed counts each route's proto-2 grants awaiting a payload, read
-- once and kept up to date as this claim grants.
local unsealed = {}
local function capped(route)
  if proto ~= '2' then
    return false
  end
  if not unsealed[route] then
    unsealed[route] = tonumber(redis.call('HGET', K.unsealed, route)) or 0
  end
  return unsealed[route] >= UNSEALED_PER_ROUTE
end

-- How many queue entries one claim may step over. An entry is skipped when
-- this runner refused the job (it stays queued for others) or its record
-- cannot be granted; refusals are matched against the runner's own refusal
-- list for that queue, walked in step, so a skip costs no record read. The
-- cap keeps a claim's work bounded even behind a long run of refusals.
local BUDGET = 4096 + max
-- Pages start just big enough for the grants asked for and double up to
-- PAGE, so a small claim on a long queue reads a few entries, not PAGE.
local PAGE = 256

local function page(key, c, lo_field, hi, more_field, buf_field, i_field, size_field)
  local size = c[size_field]
  local buf = redis.call('ZRANGEBYLEX', key, c[lo_field], hi, 'LIMIT', 0, size)
  c[buf_field], c[i_field] = buf, 1
  c[size_field] = math.min(2 * size, PAGE)
  if #buf < size then
    c[more_field] = false
  end
  if #buf > 0 then
    c[lo_field] = '(' .. buf[#buf]
  end
end

-- A cursor walks one list: a claim queue (key K.queue) or this runner's
-- sticky place for it (key K.sticky, whose members are the queue's
-- prefixed with lenc(runner)).
local cursors, known = {}, {}
local function add(key, prefix, route)
  if known[key .. prefix] then
    return
  end
  known[key .. prefix] = true
  local lo, hi = lex_range(prefix)
  local rprefix = lenc(runner) .. prefix
  local rlo, rhi = lex_range(rprefix)
  cursors[#cursors + 1] = {
    key = key, route = route, sticky = key == K.sticky,
    prefix = prefix, lo = lo, hi = hi, buf = {}, i = 1, more = true, n = math.min(max + 1, PAGE),
    rprefix = rprefix, rlo = rlo, rhi = rhi, rbuf = {}, ri = 1, rmore = true, rn = 4,
  }
end

-- open adds the cursors of one route's queues the kinds name, owner-only
-- ones on the owner's own routes, in the list key (K.queue, or K.sticky
-- for this runner's sticky places).
local function open(r, key)
  local route = lenc(r.site) .. r.owner
  local tag = ''
  if key == K.sticky then
    tag = lenc(runner)
  end
  for _, kind in ipairs(kinds) do
    add(key, tag .. queue_prefix(proto, r.site, r.owner, kind, false), route)
    if r.owner == owner then
      add(key, tag .. queue_prefix(proto, r.site, r.owner, kind, true), route)
    end
  end
end

-- Cursors are opened only on the queues of routes that hold work. Once
-- a census has passed (K.busy holds ''), those are the named routes in
-- K.busy, intersected in one call; before it, the routes' counts are read
-- a chunk of fields per call, and a route never counted is counted now.
local COUNT_CHUNK = 1000
local function counted_busy()
  local fields, busy = redis.call('SMEMBERS', K.routes), {}
  for lo = 1, #fields, COUNT_CHUNK do
    local hi = math.min(lo + COUNT_CHUNK - 1, #fields)
    local counts = redis.call('HMGET', K.qcount, unpack(fields, lo, hi))
    for i, n in ipairs(counts) do
      local field = fields[lo + i - 1]
      if not n then
        n = route_size(field)
        set_count(field, n)
      end
      if tonumber(n) > 0 then
        busy[#busy + 1] = field
      end
    end
  end
  return busy
end

local function busy_routes()
  if not has_routes or max == 0 then
    return {}
  end
  if redis.call('SISMEMBER', K.busy, '') == 1 then
    return redis.call('SINTER', K.busy, K.routes)
  end
  return counted_busy()
end

for _, field in ipairs(busy_routes()) do
  local r = route_from(field)
  if r then
    open(r, K.queue)
  end
end

-- Sticky places are read only on routes where this runner has one: its
-- few sticky entries name their routes, which must be named by the claim.
-- Past STICKY_PAGE of them, every named route's sticky places are read.
local STICKY_PAGE = 256
if proto == '2' and max > 0 and has_routes then
  local mine = lenc(runner) .. lenc(proto)
  local entries = redis.call('ZRANGEBYLEX', K.sticky, '[' .. mine, '[' .. mine .. '\255', 'LIMIT', 0, STICKY_PAGE)
  local from, fields = #lenc(runner) + 1, {}
  for _, m in ipairs(entries) do
    local stop = lenc_fields_at(m, from, 3)
    if stop then
      fields[#fields + 1] = string.sub(m, from, stop - 1)
    end
  end
  if #entries >= STICKY_PAGE then
    fields = redis.call('SMEMBERS', K.routes)
  end
  local named = {}
  if #fields > 0 and #entries < STICKY_PAGE then
    named = redis.call('SMISMEMBER', K.routes, unpack(fields))
  end
  for i, field in ipairs(fields) do
    local r = route_from(field)
    if r and (#entries >= STICKY_PAGE or named[i] == 1) then
      open(r, K.sticky)
    end
  end
end

-- seq_at reads the enqueue sequence a member carries after its prefix.
local function seq_at(member, prefix)
  return tonumber(string.sub(member, #prefix + 1, #prefix + 16))
end

-- head returns a cursor's next queue member and its sequence, reading the
-- queue in pages from after the last member read, so grants made meanwhile
-- do not shift it.
local function head(c)
  if capped(c.route) then
    return nil
  end
  if c.i > #c.buf then
    if not c.more then
      return nil
    end
    page(c.key, c, 'lo', c.hi, 'more', 'buf', 'i', 'n')
    if #c.buf == 0 then
      return nil
    end
  end
  local m = c.buf[c.i]
  return m, seq_at(m, c.prefix)
end

-- refused_here says whether this runner refused the job with sequence seq
-- in the cursor's queue, advancing the refusal walk up to it.
local function refused_here(c, seq)
  if c.sticky then
    return false -- a runner that refused a job is never its re-offer runner
  end
  while true do
    if c.ri > #c.rbuf then
      if not c.rmore then
        return false
      end
      page(K.refusals, c, 'rlo', c.rhi, 'rmore', 'rbuf', 'ri', 'rn')
      if #c.rbuf == 0 then
        return false
      end
    end
    local rs = seq_at(c.rbuf[c.ri], c.rprefix)
    if rs == seq then
      return true
    elseif rs > seq then
      return false
    end
    c.ri = c.ri + 1
  end
end

local granted = {}
if proto == '2' and has_routes and max > 0 then
  granted = regrant_returning(runner, device, lease_ms, max, now) -- D14: the holder's own first
end
local inspected = 0
local runner_tag_len = #lenc(runner)

-- unqueue removes an entry a cursor met that no job stands behind,
-- keeping the queue's count.
local function unqueue(c, member)
  if redis.call('ZREM', c.key, member) == 1 and not c.sticky then
    local stop = lenc_fields_at(member, 1, 3)
    if stop then
      queue_count(string.sub(member, 1, stop - 1), -1)
    end
  end
end

-- consider grants the job behind one entry of cursor c, or leaves it.
local function consider(c, member)
  local key = id_of(member, c.prefix)
  local qm = member
  if c.sticky then
    qm = string.sub(member, runner_tag_len + 1)
  end
  local rec, how = load(key)
  if how == 'missing' then
    -- An entry whose record vanished outside these scripts (an unreadable
    -- record dropped at its deadline): repair what this runner can see.
    unqueue(c, member)
    redis.call('ZREM', K.refusals, lenc(runner) .. member)
    return
  end
  if how == 'unreadable' then
    return -- never handed out; it stays queued for a reader that knows it
  end
  if settle_due(rec, now) then
    if settles <= 0 then
      -- Out of budget: granting past a job it cannot settle would break
      -- first-enqueue order, so the claim stops here.
      return 'stop'
    end
    settles = settles - 1
    if not settled(key, rec, now) then
      return
    end
  end
  if rec.qm ~= qm then
    unqueue(c, member) -- left by an earlier job under this key
    return
  end
  if rec.state ~= STATE_QUEUED or rec.cancelled == '1' then
    queue_out(key, rec) -- an entry that outlived its job's queued spell
    return
  end
  local only = sticky_for(rec, now)
  if (only and only ~= runner) or not_before(rec, runner) > now then
    return -- offered to another runner for now, or to this one later
  end
  if not valid_stub(rec.stub, bare_id(key)) then
    return -- never handed out; it stays queued and blocks nothing
  end
  queue_out(key, rec)
  local lease = leases[#granted / 3 + 1]
  rec.state = STATE_AWAITING_PAYLOAD
  rec.runner, rec.cowner, rec.device, rec.lease = runner, owner, device, lease
  rec.lexp = ms(now + lease_ms)
  rec.await = ms(now + window_ms)
  save(key, rec)
  await_in(key, rec, hold)
  redis.call('HSET', K.leases, lease, key)
  if proto == '2' then
    unsealed[c.route] = unsealed[c.route] + 1
  end
  granted[#granted + 1] = rec.stub
  granted[#granted + 1] = lease
  granted[#granted + 1] = rec.lexp
end

-- skip_run steps over a run of refused entries at a cursor's head, whose
-- first entry is the refusal under the refusal walk. K.refusals holds only
-- refusals of queued jobs, so when the runner's next k refusals in this
-- queue span exactly k queue entries, those entries are all refused. The
-- longest such run is found by galloping then halving, in O(log) calls
-- each O(log N), however long the run.
local function skip_run(c, member)
  local base = redis.call('ZRANK', K.refusals, c.rbuf[c.ri])
  if not base then
    return false
  end
  local function fits(k)
    local r = redis.call('ZRANGE', K.refusals, base + k - 1, base + k - 1)[1]
    if not r or string.sub(r, 1, #c.rprefix) ~= c.rprefix then
      return nil
    end
    local last = string.sub(r, runner_tag_len + 1)
    if redis.call('ZLEXCOUNT', K.queue, '[' .. member, '[' .. last) == k then
      return last
    end
    return nil
  end
  local good, good_last, bad = 1, nil, nil
  local k = 2
  while not bad do
    local last = fits(k)
    if last then
      good, good_last, k = k, last, k * 2
    else
      bad = k
    end
  end
  while bad - good > 1 do
    local mid = math.floor((good + bad) / 2)
    local last = fits(mid)
    if last then
      good, good_last = mid, last
    else
      bad = mid
    end
  end
  if not good_last then
    return false
  end
  c.lo, c.buf, c.i, c.more, c.n = '(' .. good_last, {}, 1, true, math.min(max + 1, PAGE)
  c.rlo, c.rbuf, c.ri, c.rmore, c.rn = '(' .. lenc(runner) .. good_last, {}, 1, true, 4
  return true
end

-- Merge the candidate queues by enqueue sequence: first-enqueue order.
while #granted / 3 < max and inspected < BUDGET do
  local best, best_member, best_seq
  for _, c in ipairs(cursors) do
    local m, seq = head(c)
    if m and (not best or seq < best_seq) then
      best, best_member, best_seq = c, m, seq
    end
  end
  if not best then
    break
  end
  inspected = inspected + 1
  if refused_here(best, best_seq) then
    if not skip_run(best, best_member) then
      best.i = best.i + 1
    end
  else
    best.i = best.i + 1
    if consider(best, best_member) == 'stop' then
      break
    end
  end
end

return { 'ok', frame(granted) }
