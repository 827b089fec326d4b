-- Shared helpers for every relayd script. The Go loader (scripts.go) puts
-- a generated header binding KEYS to the table K first, then the schema
-- definitions generated from schema.go (FORMAT, LEGACY_FORMAT,
-- PRESENCE_FORMAT, WINDOW_MS, UNSEALED_PER_ROUTE, SEAL_ATTEMPTS, HOLDER_RETURN_MS,
-- REQ_TTL_MS, ROUTES_TTL_MS, STATE_*, REFUSED_*, FIELDS, LEGACY_FIELDS, PRESENCE_FIELDS,
-- DEVICE_KEY_ID, STUB_*) and the top-level definitions below that the
-- operation uses (directly or through each other, in this order), then the
-- operation's own file, so each rule below exists once and a call runs no
-- definition it does not need. A remembering write's header also binds
-- REQ_ID (taken off the front of ARGV), MEMO_ANSWERS and MEMO_BYTES,
-- and its file runs inside answer_once. This comment is not sent.
--
-- A job is keyed by (site, id): its job key is lenc(site) .. id (job_key),
-- which names it in every hash and every index below. Replies name jobs by
-- their bare id. Stored shapes (all under one hash-tagged prefix, so one
-- slot):
--   K.job       hash  job key -> job record (framed, format FORMAT)
--   K.payload   hash  job key -> sealed payload (JSON written by Go)
--   K.result    hash  job key -> sealed result (JSON written by Go)
--   K.order     zset  job key, score = enqueue sequence (every job)
--   K.deadline  zset  job key, score = stub deadlineAt (every job)
--   K.window    zset  job key, score = awaitingUntil (awaiting-payload jobs)
--   K.lease     zset  job key, score = leaseExpiresAt (ready and running jobs)
--   K.queue     zset  lex, score 0: queue prefix .. seq16 .. key (queued, not
--                     cancelled, not held back for a re-offer)
--   K.sticky    zset  lex, score 0: lenc(runner) .. queue member, for a queued
--                     proto-2 job re-offered only to that runner (D8)
--   K.reoffer   zset  job key, score = reofferUntil (jobs in K.sticky)
--   K.returning zset  lex, score 0: lenc(proto .. holder) .. seq16 .. key, for a
--                     sealed proto-2 job whose lease lapsed, kept for its holder (D14)
--   K.awaiting  zset  lex, score 0: site prefix .. seq16 .. key (awaiting-payload jobs,
--                     less those a claim holds until it settles them, G-R16: an
--                     awaiting job missing here is held, see is_held)
--   K.finished  zset  lex, score 0: site prefix .. seq16 .. key (done jobs)
--   K.cancels   zset  lex, score 0: proto+runner prefix .. seq16 .. key
--                     (cancelled and held; proto 0: not done)
--   K.refusals  zset  lex, score 0: lenc(runner) .. queue member, for each runner that
--                     refused a job while that job is in K.queue (and only then)
--   K.leases    hash  lease id -> job key, for current grants (kept by completion)
--   K.byid      zset  lex, score 0: lenc(id) .. '|' .. seq16 .. key (every job)
--   K.unsealed  hash  lenc(site) .. job owner -> proto-2 jobs awaiting a payload
--   K.qcount    hash  lenc(proto) .. lenc(site) .. lenc(job owner) -> the entries
--                     of that route's queues in K.queue (kept at 0, not deleted,
--                     so a route never counted reads as unknown); field '' holds
--                     the sweep's recount cursor, field 'census' its census cursor
--   K.busy      set   the K.qcount fields (routes, per protocol) whose count is
--                     above 0, kept with the counts (set_count); member '' says a
--                     census of K.queue has passed, so a route missing here holds
--                     no work (until then a claim reads the counts)
--   K.routes    set   (claim and routes.lua only: <prefix>routes:<sha256>) one
--                     claim's route fields, stored by routes.lua, its expiry
--                     refreshed by each claim that names it (routes.go)
--   K.listing   hash  'v|' .. site -> the site's results version; job key -> that
--                     version when the listed (done) job last changed (its mark);
--                     'j|' .. site -> the last version number K.changes holds,
--                     'h|' .. site -> the journal's horizon (listing_changed)
--   K.changes   zset  lex, score 0: lenc('l' .. site) .. '|' .. seq16(version
--                     number) .. key, one per listed job, at its mark; and
--                     lenc('t' .. site) .. '|' .. seq16(n) .. key, a job gone at n
--   K.seq       string  the enqueue and pairing sequence
--   K.clock     string  the test clock lever, declared only in a store opened for tests
--                     (testclock.lua); production scripts do not receive it
--   K.presence  hash  runner id -> presence record (framed)
--   K.paired    zset  runner id, score = sequence at first pairing
--   K.bucket    string  (admitting scripts: the rate bucket an admission charges,
--                     ratelimit:<caller>) the instant in microseconds it is full
--                     again (take_token)
--   K.memo      string  (per caller and operation; the caller is a runner, site
--                     or pairing device) framed [request id, framed reply]...
--                     newest first (answer_once)
--   <prefix>format  string  the record-format marker; read and raised only at open
--                     (format.go), never by these scripts
--   K.old_job ... K.old_refusals  the format-"1" keyspace older relays use, keyed by bare id;
--               a sweep moves its jobs here (migrate_legacy)
--
-- Lex-ordered sets hold many logical lists in one key: a member starts with
-- a self-delimiting prefix naming its list, so ZRANGEBYLEX over that prefix
-- reads one list's head in O(log N). Every key a script touches is thus
-- fixed and declared in KEYS, including when a job goes back to a queue
-- chosen by its own data.

-- clock_now reads the store clock: Valkey TIME in ms. Each script calls it
-- once, at the top, and derives every decision from it. A store opened for
-- tests is built with testclock.lua's clock_now instead, which obeys the
-- test clock lever; production scripts have no such lever.
local function clock_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- clock_us reads the rate buckets' clock: Valkey TIME in microseconds,
-- which testclock.lua also replaces in a store opened for tests.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- take_token takes one request from the rate bucket at key, which holds
-- the instant (microseconds) it is full again, for a rate of one request
-- every `every` microseconds and bursts of `burst`. It answers 0 when a
-- request was taken, or how many microseconds until one can be. Taking
-- none writes nothing; the key expires once the bucket is full again,
-- which is the same as not existing, so idle callers cost nothing.
local function take_token(key, every, burst)
  local now = clock_us()
  local full = tonumber(redis.call('GET', key) or '') or now
  if full < now then
    full = now
  end
  local wait = full - now - (burst - 1) * every
  if wait > 0 then
    return wait
  end
  full = full + every
  redis.call('SET', key, string.format('%d', full), 'PX', math.ceil((full - now) / 1000))
  return 0
end

-- ms formats an integer number of milliseconds without exponent notation.
local function ms(n)
  return string.format('%d', n)
end

-- frame joins strings as <length>:<bytes>..., which any byte survives.
local function frame(list)
  local parts = {}
  for i = 1, #list do
    local s = list[i]
    parts[i] = #s .. ':' .. s
  end
  return table.concat(parts)
end

-- unframe splits a framed string, or returns nil when it is not one. The
-- anchored pattern reads a length and its colon in one step.
local function unframe(raw)
  if type(raw) ~= 'string' then
    return nil
  end
  local out, pos, n, count = {}, 1, #raw, 0
  while pos <= n do
    local _, colon, digits = string.find(raw, '^(%d+):', pos)
    if not colon or #digits > 10 then
      return nil
    end
    local stop = colon + tonumber(digits)
    if stop > n then
      return nil
    end
    count = count + 1
    out[count] = string.sub(raw, colon + 1, stop)
    pos = stop + 1
  end
  return out
end

-- lenc makes a string self-delimiting, so concatenations of them are
-- unambiguous and no list prefix is a prefix of another.
local function lenc(s)
  return #s .. ':' .. s
end

-- unlenc reads the lenc'd string at pos of s, returning it and the
-- position after it, or nil when there is none.
local function unlenc(s, pos)
  local colon = string.find(s, ':', pos, true)
  if not colon then
    return nil
  end
  local n = tonumber(string.sub(s, pos, colon - 1))
  if not n then
    return nil
  end
  return string.sub(s, colon + 1, colon + n), colon + n + 1
end

-- job_key names a job by (site, id) in every hash and index.
local function job_key(site, id)
  return lenc(site) .. id
end

-- bare_id is the job id a job key names.
local function bare_id(key)
  local _, after = unlenc(key, 1)
  return string.sub(key, after or 1)
end

local function seq16(seq)
  return string.format('%016d', tonumber(seq))
end

-- queue_prefix names the claim queue of one protocol, site, owner and
-- kind; owner-only jobs ("self", "private") are kept apart because only
-- the owner's own devices may take them.
local function queue_prefix(proto, site, owner, kind, owner_only)
  local class = 'p'
  if owner_only then
    class = 's'
  end
  return lenc(proto) .. lenc(site) .. lenc(owner) .. lenc(kind) .. class .. '|'
end

local function list_prefix(name)
  return lenc(name) .. '|'
end

-- lex_range returns the ZRANGEBYLEX bounds of the members starting with a
-- prefix that ends in '|'.
local function lex_range(prefix)
  return '[' .. prefix, '(' .. string.sub(prefix, 1, -2) .. '}'
end

local function is_int(s)
  return type(s) == 'string' and string.find(s, '^%-?%d+$') ~= nil
end

-- read_record splits a record of a format (its first field) into a table
-- by build, one of the <list>_record functions the schema defines, and
-- returns the raw fields too; nil when it is not such a record. A record
-- must have required fields (fields added later read as '').
local function read_record(raw, format, required, build)
  local f = unframe(raw)
  if not f or #f < required or f[1] ~= format then
    return nil
  end
  return build(f), f
end

-- write_record frames rec's fields named by names, then the list extra.
local function write_record(rec, format, names, extra)
  local f = { format }
  for i = 2, #names do
    f[i] = rec[names[i]]
  end
  for i = 1, #extra do
    f[#names + i] = extra[i]
  end
  return frame(f)
end

-- decode_job returns the record, or nil when it is unreadable or of a format
-- this code does not know: such a record is never acted on but by its
-- deadline. Job records hold FIELDS, then the refusing runners.
local function decode_job(raw)
  local rec, f = read_record(raw, FORMAT, #FIELDS, FIELDS_record)
  if not rec then
    return nil
  end
  local refused = {}
  for i = #FIELDS + 1, #f do
    refused[i - #FIELDS] = f[i]
  end
  rec.refused = refused
  if not is_int(rec.seq) or not is_int(rec.deadline) then
    return nil
  end
  if (rec.lexp ~= '' and not is_int(rec.lexp)) or (rec.await ~= '' and not is_int(rec.await)) then
    return nil
  end
  if (rec.attempts ~= '' and not is_int(rec.attempts)) or (rec.runtil ~= '' and not is_int(rec.runtil)) then
    return nil
  end
  return rec
end

local function encode_job(rec)
  return write_record(rec, FORMAT, FIELDS, rec.refused)
end

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

-- answer_once runs a write once per request id: the first run's whole
-- reply (a refusal too) is kept in the caller's memo of the operation
-- (K.memo), and a re-run with the same REQ_ID, which is what a
-- client's retry after a lost reply is, gets that reply and changes
-- nothing. A caller may have many calls of one operation in flight (a
-- site enqueues for many users at once), and a retry follows its lost
-- reply by a reconnect or two, while the caller's other calls go on, so
-- the memo keeps the caller's MEMO_ANSWERS newest answers to that
-- operation (within MEMO_BYTES, the newest always), not just the last:
-- a retry of A after B ran still finds A. The memo lives REQ_TTL_MS past
-- the caller's last call, so it costs one key per active caller and
-- operation, not one per call.
--
-- The memo is a hash: '=' .. request id holds that call's framed reply;
-- the answers take MEMO_ANSWERS slots in turn, '@' .. slot naming the
-- request id in each ('#' counts the answers ever kept, '+' the bytes of
-- the replies kept). A call looks its own id up; a new answer drops the
-- one in its slot, and the oldest others while the replies exceed
-- MEMO_BYTES. So a call costs a few commands however deep the memo.
local function answer_once(run)
  local kept = redis.call('HGET', K.memo, '=' .. REQ_ID)
  if kept then
    return unframe(kept)
  end
  local reply = run()
  -- Error and status replies are not answers a caller acts on: a retry
  -- runs again.
  if type(reply) ~= 'table' or reply.err or reply.ok then
    return reply
  end
  local parts = {}
  for i = 1, #reply do
    parts[i] = tostring(reply[i])
  end
  local entry = frame(parts)
  local n = redis.call('HINCRBY', K.memo, '#', 1)
  local bytes = redis.call('HINCRBY', K.memo, '+', #entry)
  -- back = MEMO_ANSWERS is this answer's own slot, held by answer n - MEMO_ANSWERS.
  for back = MEMO_ANSWERS, 1, -1 do
    if back < MEMO_ANSWERS and bytes <= MEMO_BYTES then
      break
    end
    local slot = '@' .. ((n - back) % MEMO_ANSWERS)
    local old = redis.call('HGET', K.memo, slot)
    if old then
      bytes = bytes - redis.call('HSTRLEN', K.memo, '=' .. old)
      redis.call('HDEL', K.memo, slot, '=' .. old)
    end
  end
  redis.call('HSET', K.memo, '@' .. (n % MEMO_ANSWERS), REQ_ID, '=' .. REQ_ID, entry, '+', bytes)
  redis.call('PEXPIRE', K.memo, REQ_TTL_MS)
  return reply
end

-- Presence records hold PRESENCE_FIELDS: format, owner, device JSON,
-- lastSeenAt, then capabilities and withheld JSON ('' when never said),
-- which records written before them lack.
local function decode_presence(raw)
  local p = read_record(raw, PRESENCE_FORMAT, PRESENCE_REQUIRED, PRESENCE_FIELDS_record)
  if not p or not is_int(p.seen) then
    return nil
  end
  return p
end

local function encode_presence(p)
  return write_record(p, PRESENCE_FORMAT, PRESENCE_FIELDS, {})
end

-- The presences this call has read or written, by runner (false: none),
-- so that a call which checks its runner and then stamps it reads and
-- decodes the record once.
local presences_seen = {}

-- read_presence returns a runner's presence, decoded, or nil.
local function read_presence(runner)
  local p = presences_seen[runner]
  if p == nil then
    p = decode_presence(redis.call('HGET', K.presence, runner)) or false
    presences_seen[runner] = p
  end
  return p or nil
end

-- write_presence stores a runner's presence and returns its record.
local function write_presence(runner, p)
  local raw = encode_presence(p)
  redis.call('HSET', K.presence, runner, raw)
  presences_seen[runner] = p
  return raw
end

-- stamp_presence sets a paired runner's last-seen time to now and says
-- whether the runner is paired; it never creates a presence.
local function stamp_presence(runner, now)
  local p = read_presence(runner)
  if not p then
    return false
  end
  p.seen = ms(now)
  write_presence(runner, p)
  return true
end

-- pair_presence records a pairing (pair, and a heartbeat's stamp in
-- protocol "2"): it creates the runner's presence or refreshes its owner
-- and device JSON, stamped now; capabilities and withheld JSON are
-- replaced when given ('1') and kept when not. It returns the record.
local function pair_presence(now, runner, owner, device, caps, caps_given, withheld, withheld_given)
  if redis.call('ZSCORE', K.paired, runner) == false then
    redis.call('ZADD', K.paired, redis.call('INCR', K.seq), runner)
  end
  local old = read_presence(runner) or { caps = '', withheld = '' }
  local p = { owner = owner, device = device, seen = ms(now), caps = old.caps, withheld = old.withheld }
  if caps_given == '1' then
    p.caps = caps
  end
  if withheld_given == '1' then
    p.withheld = withheld
  end
  return write_presence(runner, p)
end

-- admit checks the admission of a daemon call (ADMIT, which the header of
-- an admitting script binds) before anything else of the call: it answers
-- nil when the call may go on, or the refusal to answer. The presence
-- must hold exactly the owner and device JSON given, then the bucket
-- K.bucket must have a request; a refusal writes nothing. An admitted
-- call then has its presence written, when asked, as pair writes it (on
-- a reading of the clock of its own, taken before the operation's).
local function admit()
  if ADMIT.paired == '1' then
    local p = read_presence(ADMIT.runner)
    if not p or p.owner ~= ADMIT.owner or p.device ~= ADMIT.device then
      return { 'refused', REFUSED_UNKNOWN_RUNNER }
    end
  end
  if ADMIT.charge == '1' then
    local wait = take_token(K.bucket, tonumber(ADMIT.every), tonumber(ADMIT.burst))
    if wait > 0 then
      return { 'refused', REFUSED_RATE_LIMITED, string.format('%d', wait) }
    end
  end
  if ADMIT.pair == '1' then
    pair_presence(clock_now(), ADMIT.runner, ADMIT.pair_owner, ADMIT.pair_device,
      ADMIT.caps, ADMIT.caps_given, ADMIT.withheld, ADMIT.withheld_given)
  end
  return nil
end

-- read_jobs returns, for each job key, the bare id, record, payload and
-- result (false where absent, and for the payload unless with_payload),
-- flat.
local function read_jobs(keys, with_payload)
  local out = {}
  for _, key in ipairs(keys) do
    out[#out + 1] = bare_id(key)
    out[#out + 1] = redis.call('HGET', K.job, key)
    out[#out + 1] = with_payload and redis.call('HGET', K.payload, key)
    out[#out + 1] = redis.call('HGET', K.result, key)
  end
  return out
end

-- id_of strips a lex member's list prefix and sequence, leaving the job
-- key.
local function id_of(member, prefix)
  return string.sub(member, #prefix + 17)
end

-- results_version reads what a replica's cached results listing of a site
-- is checked by: the site's results version and how many jobs it lists
-- (which also catches jobs finished by a relay that keeps no version).
local function results_version(site)
  local lo, hi = lex_range(list_prefix(site))
  return { redis.call('HGET', K.listing, 'v|' .. site) or '', tostring(redis.call('ZLEXCOUNT', K.finished, lo, hi)) }
end

-- site_page reads a page of one site's jobs from a per-site lex index
-- (awaiting or finished). ARGV: site, last member read ('' for the start),
-- page size, page byte cap (records and results; one job always fits).
-- Reply: {last member, more '1'|'0', then id, record, false, result...}:
-- the site sealed the payload itself and polls these listings, so they
-- leave the payload out.
local function site_page(index)
  local prefix = list_prefix(ARGV[1])
  local lo, hi = lex_range(prefix)
  if ARGV[2] ~= '' then
    lo = '(' .. ARGV[2]
  end
  local n, cap = tonumber(ARGV[3]), tonumber(ARGV[4])
  local members = redis.call('ZRANGEBYLEX', index, lo, hi, 'LIMIT', 0, n)
  local ids, bytes, last = {}, 0, ''
  for _, m in ipairs(members) do
    local key = id_of(m, prefix)
    bytes = bytes + redis.call('HSTRLEN', K.job, key) + redis.call('HSTRLEN', K.result, key)
    if #ids > 0 and bytes > cap then
      break
    end
    ids[#ids + 1] = key
    last = m
  end
  local more = '0'
  if #ids < #members or #members == n then
    more = '1'
  end
  local out = read_jobs(ids, false)
  table.insert(out, 1, more)
  table.insert(out, 1, last)
  return out
end

-- held_touching is held for a daemon call that may also stamp the
-- runner's presence: touch '1' stamps it first, whatever the outcome.
local function held_touching(proto, site, id, runner, lease, touch, now, sites)
  if touch == '1' then
    stamp_presence(runner, now)
  end
  return held(proto, site, id, runner, lease, now, sites)
end

-- each_grant visits the (job id, lease id) pairs of ARGV from index first
-- on, in order, each job of proto resolved as held does (site '' for lease
-- first) and live at now: visit gets the id, then the key and the record
-- when runner holds the job under that lease, else nils. Every pair is
-- resolved, its record decoded (and its deadlines applied), before visit
-- runs for any, so no write of the call comes before a record it has yet
-- to read; a record this code cannot read counts as not held, and never
-- fails the call halfway. A job named twice is visited with its one
-- record, checked again each time.
local function each_grant(now, proto, site, runner, first, visit)
  local grants, by_key = {}, {}
  for i = first, #ARGV - 1, 2 do
    local id, lease = ARGV[i], ARGV[i + 1]
    local key, rec = resolve(proto, site, id, runner, lease, now)
    if rec then
      by_key[key] = by_key[key] or rec
      rec = by_key[key]
    end
    grants[#grants + 1] = { id = id, lease = lease, key = key, rec = rec }
  end
  for _, g in ipairs(grants) do
    if g.rec and not holder_refusal(g.rec, runner, g.lease) then
      visit(g.id, g.key, g.rec)
    else
      visit(g.id)
    end
  end
end

-- score_page reads a page of a score-ordered index. ARGV: exclusive lower
-- bound on the score ('' for the start), page size. It returns the flat
-- {member, score...} page.
local function score_page(index)
  local lo = '-inf'
  if ARGV[1] ~= '' then
    lo = '(' .. ARGV[1]
  end
  return redis.call('ZRANGEBYSCORE', index, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
end

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

-- Pending device codes (spec protocol-2 §5.7), under the same prefix:
--   K.pairings          hash  device code -> pending record (PAIRING_FORMAT, PAIRING_FIELDS)
--   K.pairing_expiry    zset  device code, score = expiresAt on the store clock
--   K.pairing_identity  hash  device identity -> its device codes, first started
--                             first, joined by ',' (base64url has none); a
--                             value of one code is what a relay that kept one
--                             code per identity wrote
--   K.pairing_user      zset  lex, score 0: lenc(user code) .. '|' .. seq16 .. device code
-- A start sets all four to expire with the last code to die, so nothing
-- lingers once no code is pending; expiry itself is judged on the clock.

-- pairing_read splits a pending record into a table by PAIRING_FIELDS, or
-- returns nil when it is not a record of PAIRING_FORMAT. A record of the
-- first layout (PAIRING_FIRST_FIELDS) reads the later fields as ''.
local function pairing_read(raw)
  local f = unframe(raw)
  if not f or #f < PAIRING_FIRST_FIELDS or f[1] ~= PAIRING_FORMAT then
    return nil
  end
  local rec = {}
  for i = 2, #PAIRING_FIELDS do
    rec[PAIRING_FIELDS[i]] = f[i] or ''
  end
  return rec
end

-- pairing_write frames a pending record's fields in PAIRING_FIELDS order.
local function pairing_write(rec)
  local f = { PAIRING_FORMAT }
  for i = 2, #PAIRING_FIELDS do
    f[i] = rec[PAIRING_FIELDS[i]]
  end
  return frame(f)
end

-- pairing_user_member is a code's entry in the user-code index: the
-- sequence orders codes that share a user code, first started first.
local function pairing_user_member(user, seq, device_code)
  return list_prefix(user) .. seq16(seq) .. device_code
end

-- pairing_codes_of lists an identity's device codes, first started first.
local function pairing_codes_of(identity)
  local out = {}
  local held = redis.call('HGET', K.pairing_identity, identity)
  if held then
    for code in string.gmatch(held, '[^,]+') do
      out[#out + 1] = code
    end
  end
  return out
end

-- pairing_unindex takes one device code out of its identity's list.
local function pairing_unindex(identity, device_code)
  local rest = {}
  for _, code in ipairs(pairing_codes_of(identity)) do
    if code ~= device_code then
      rest[#rest + 1] = code
    end
  end
  if #rest == 0 then
    redis.call('HDEL', K.pairing_identity, identity)
  else
    redis.call('HSET', K.pairing_identity, identity, table.concat(rest, ','))
  end
end

-- pairing_drop removes one pending code from every index.
local function pairing_drop(device_code)
  local rec = pairing_read(redis.call('HGET', K.pairings, device_code))
  redis.call('HDEL', K.pairings, device_code)
  redis.call('ZREM', K.pairing_expiry, device_code)
  if rec then
    redis.call('ZREM', K.pairing_user, pairing_user_member(rec.user, rec.seq, device_code))
    pairing_unindex(rec.identity, device_code)
  end
end

-- pairing_purge drops up to batch codes whose expiry has come; the
-- capacity count skips any the batch leaves.
local function pairing_purge(now, batch)
  local due = redis.call('ZRANGEBYSCORE', K.pairing_expiry, '-inf', ms(now), 'LIMIT', 0, batch)
  for i = 1, #due do
    pairing_drop(due[i])
  end
end

-- pairing_live_count is how many of an identity's codes are alive at now.
local function pairing_live_count(identity, now)
  local n = 0
  for _, code in ipairs(pairing_codes_of(identity)) do
    local expires = redis.call('ZSCORE', K.pairing_expiry, code)
    if expires and tonumber(expires) > now then
      n = n + 1
    end
  end
  return n
end

-- pairing_live returns {device code, record, its identity's live code
-- count} for a code alive at now (a code dies at its expiresAt), or nil.
local function pairing_live(device_code, now)
  local raw = redis.call('HGET', K.pairings, device_code)
  local rec = pairing_read(raw)
  if rec and tonumber(rec.expires) > now then
    return { device_code, raw, tostring(pairing_live_count(rec.identity, now)) }
  end
  return nil
end

-- pairing_by_user returns the device code and record of the first started
-- live code with exactly this user code that passes keep (nil: any), or nil.
local function pairing_by_user(user, now, keep)
  local prefix = list_prefix(user)
  local from, to = lex_range(prefix)
  -- Only codes sharing this user code are read: a collision is rare, and
  -- expired entries leave at the next start's purge.
  local entries = redis.call('ZRANGEBYLEX', K.pairing_user, from, to, 'LIMIT', 0, 32)
  for i = 1, #entries do
    local code = string.sub(entries[i], #prefix + 17)
    local raw = redis.call('HGET', K.pairings, code)
    local rec = pairing_read(raw)
    if rec and tonumber(rec.expires) > now and (keep == nil or keep(rec)) then
      return code, rec
    end
  end
  return nil
end

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
