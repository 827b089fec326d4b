-- Shared helpers for every relayd script. The Go loader (scripts.go) puts
-- a generated header binding KEYS to the table K first, then the schema
-- definitions generated from schema.go (FORMAT, REQ_TTL_MS, STATE_*,
-- REFUSED_*, FIELDS, PRESENCE_FIELDS, DEVICE_KEY_ID, STUB_*)
-- and the top-level definitions below that the operation uses (directly or
-- through each other, in this order), then the operation's own file, so
-- each rule below exists once and a call runs no definition it does not
-- need. This comment is not sent.
--
-- Stored shapes (all under one hash-tagged prefix, so one slot):
--   K.job       hash  job id -> job record (framed, format FORMAT)
--   K.payload   hash  job id -> sealed payload (JSON written by Go)
--   K.result    hash  job id -> sealed result (JSON written by Go)
--   K.order     zset  job id, score = enqueue sequence (every job)
--   K.deadline  zset  job id, score = stub deadlineAt (every job)
--   K.window    zset  job id, score = awaitingUntil (awaiting-payload jobs)
--   K.lease     zset  job id, score = leaseExpiresAt (ready and running jobs)
--   K.queue     zset  lex, score 0: queue prefix .. seq16 .. id (queued, not cancelled)
--   K.awaiting  zset  lex, score 0: site prefix .. seq16 .. id (awaiting-payload jobs)
--   K.finished  zset  lex, score 0: site prefix .. seq16 .. id (done jobs)
--   K.cancels   zset  lex, score 0: runner prefix .. seq16 .. id (cancelled, held, not done)
--   K.refusals  zset  lex, score 0: lenc(runner) .. queue member, for each runner that
--                     refused a job while that job is in K.queue (and only then)
--   K.seq       string  the enqueue and pairing sequence
--   K.clock     string  test-only clock lever (see clock_now); production never writes it
--   K.presence  hash  runner id -> presence record (framed)
--   K.paired    zset  runner id, score = sequence at first pairing
--   K.req       string  (per call) the remembered answer of a stamping write
--
-- Lex-ordered sets hold many logical lists in one key: a member starts with
-- a self-delimiting prefix naming its list, so ZRANGEBYLEX over that prefix
-- reads one list's head in O(log N). Every key a script touches is thus
-- fixed and declared in KEYS, including when a job goes back to a queue
-- chosen by its own data.

-- clock_now reads the store clock: Valkey TIME in ms. Each script calls it
-- once, at the top, and derives every decision from it. Tests alone write
-- K.clock to move that clock: '<n>' adds n ms to TIME, '@<ms>' pins it.
-- Production never sets the key.
local function clock_now()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local lever = redis.call('GET', K.clock)
  if lever then
    if string.sub(lever, 1, 1) == '@' then
      return tonumber(string.sub(lever, 2)) or now
    end
    return now + (tonumber(lever) or 0)
  end
  return now
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

-- unframe splits a framed string, or returns nil when it is not one.
local function unframe(raw)
  if type(raw) ~= 'string' then
    return nil
  end
  local out, pos, n = {}, 1, #raw
  while pos <= n do
    local colon = string.find(raw, ':', pos, true)
    if not colon or colon == pos or colon - pos > 10 then
      return nil
    end
    local digits = string.sub(raw, pos, colon - 1)
    if not string.find(digits, '^%d+$') then
      return nil
    end
    local stop = colon + tonumber(digits)
    if stop > n then
      return nil
    end
    out[#out + 1] = string.sub(raw, colon + 1, stop)
    pos = stop + 1
  end
  return out
end

-- lenc makes a string self-delimiting, so concatenations of them are
-- unambiguous and no list prefix is a prefix of another.
local function lenc(s)
  return #s .. ':' .. s
end

local function seq16(seq)
  return string.format('%016d', tonumber(seq))
end

-- queue_prefix names the claim queue of one site, owner and kind; "self"
-- jobs are kept apart because only the owner's own devices may take them.
local function queue_prefix(site, owner, kind, self)
  local class = 'p'
  if self then
    class = 's'
  end
  return lenc(site) .. lenc(owner) .. lenc(kind) .. class .. '|'
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

-- read_record splits a record whose fields are named by names (the format
-- first) into a table by those names, and returns the raw fields too; nil
-- when it is not a record of this format.
local function read_record(raw, names)
  local f = unframe(raw)
  if not f or #f < #names or f[1] ~= FORMAT then
    return nil
  end
  local rec = {}
  for i = 2, #names do
    rec[names[i]] = f[i]
  end
  return rec, f
end

-- write_record frames rec's fields named by names, then the list extra.
local function write_record(rec, names, extra)
  local f = { FORMAT }
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
  local rec, f = read_record(raw, FIELDS)
  if not rec then
    return nil
  end
  rec.refused = {}
  for i = #FIELDS + 1, #f do
    rec.refused[#rec.refused + 1] = f[i]
  end
  if not is_int(rec.seq) or not is_int(rec.deadline) then
    return nil
  end
  if (rec.lexp ~= '' and not is_int(rec.lexp)) or (rec.await ~= '' and not is_int(rec.await)) then
    return nil
  end
  return rec
end

local function encode_job(rec)
  return write_record(rec, FIELDS, rec.refused)
end

local function save(id, rec)
  redis.call('HSET', K.job, id, encode_job(rec))
end

-- load returns the job record and a word: 'ok', 'missing' or 'unreadable'.
local function load(id)
  local raw = redis.call('HGET', K.job, id)
  if not raw then
    return nil, 'missing'
  end
  local rec = decode_job(raw)
  if not rec then
    return nil, 'unreadable'
  end
  return rec, 'ok'
end

local function unreadable(id)
  return redis.error_reply('RELAYD-UNREADABLE job record ' .. id .. ' is not in a format this relay reads')
end

local function site_member(rec, id)
  return list_prefix(rec.site) .. seq16(rec.seq) .. id
end

local function runner_member(rec, id)
  return list_prefix(rec.runner) .. seq16(rec.seq) .. id
end

-- refusal_member files a refusal next to the runner's other refusals in the
-- same queue, in queue order, so a claim can step over them cheaply.
local function refusal_member(runner, rec)
  return lenc(runner) .. rec.qm
end

-- queue_in and queue_out put a job in its claim queue and take it out,
-- keeping K.refusals to exactly the refusals of queued jobs: a claim relies
-- on every refusal it reads standing for an entry of the queue.
local function queue_in(rec)
  redis.call('ZADD', K.queue, 0, rec.qm)
  for _, r in ipairs(rec.refused) do
    redis.call('ZADD', K.refusals, 0, refusal_member(r, rec))
  end
end

local function queue_out(rec)
  redis.call('ZREM', K.queue, rec.qm)
  for _, r in ipairs(rec.refused) do
    redis.call('ZREM', K.refusals, refusal_member(r, rec))
  end
end

-- drop deletes a job with everything it holds, payload and result included.
-- rec may be nil for a record this code cannot read: the id-keyed entries
-- go, and a stale lex entry left behind is cleaned up by whoever meets it.
local function drop(id, rec)
  redis.call('HDEL', K.job, id)
  redis.call('HDEL', K.payload, id)
  redis.call('HDEL', K.result, id)
  redis.call('ZREM', K.order, id)
  redis.call('ZREM', K.deadline, id)
  redis.call('ZREM', K.window, id)
  redis.call('ZREM', K.lease, id)
  if rec then
    queue_out(rec)
    local sm = site_member(rec, id)
    redis.call('ZREM', K.awaiting, sm)
    redis.call('ZREM', K.finished, sm)
    if rec.runner ~= '' then
      redis.call('ZREM', K.cancels, runner_member(rec, id))
    end
  end
end

-- requeue puts a job back in its queue at its original place, dropping the
-- grant and the payload but keeping refusals, cancellation and any result.
-- A cancelled job stays out of the queue: it is never offered again.
local function requeue(id, rec)
  redis.call('ZREM', K.window, id)
  redis.call('ZREM', K.lease, id)
  redis.call('ZREM', K.awaiting, site_member(rec, id))
  if rec.runner ~= '' then
    redis.call('ZREM', K.cancels, runner_member(rec, id))
  end
  redis.call('HDEL', K.payload, id)
  rec.state = STATE_QUEUED
  rec.runner, rec.cowner, rec.device, rec.lease, rec.lexp, rec.await = '', '', '', '', '', ''
  if rec.cancelled ~= '1' then
    queue_in(rec)
  end
  save(id, rec)
end

-- settle applies a job's passed deadlines at now (relayd G8): past its
-- deadline the job is deleted; past its sealing window, or past its lease
-- while ready or running, it goes back to the queue. Bounds are inclusive.
-- It returns 'gone', 'requeued' or 'live'.
local function settle(id, rec, now)
  if tonumber(rec.deadline) <= now then
    drop(id, rec)
    return 'gone'
  end
  if rec.state == STATE_AWAITING_PAYLOAD then
    if (tonumber(rec.await) or 0) <= now then
      requeue(id, rec)
      return 'requeued'
    end
  elseif (rec.state == STATE_READY or rec.state == STATE_RUNNING) and rec.runner ~= '' then
    if (tonumber(rec.lexp) or 0) <= now then
      requeue(id, rec)
      return 'requeued'
    end
  end
  return 'live'
end

-- live loads a job and settles it: it returns the record, or nil and
-- 'missing' (absent or just dropped) or 'unreadable'.
local function live(id, now)
  local rec, how = load(id)
  if not rec then
    return nil, how
  end
  if settle(id, rec, now) == 'gone' then
    return nil, 'missing'
  end
  return rec, 'ok'
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

-- held returns the live job that runner holds under lease, or nil and the
-- reply that refuses the call (unreadable record, not-found, not-holder,
-- stale-lease), in the reference's order.
local function held(id, runner, lease, now)
  local rec, how = live(id, now)
  if how == 'unreadable' then
    return nil, unreadable(id)
  end
  if not rec then
    return nil, { 'refused', REFUSED_NOT_FOUND }
  end
  local no = holder_refusal(rec, runner, lease)
  if no then
    return nil, { 'refused', no }
  end
  return rec
end

-- sweep applies the deadlines due at now, taking at most batch entries from
-- each deadline index, and returns the requeued and the expired ids, each
-- in first-enqueue order.
local function sweep(now, batch)
  local due, seen = {}, {}
  for _, key in ipairs({ K.deadline, K.window, K.lease }) do
    local ids = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', 0, batch)
    for _, id in ipairs(ids) do
      if not seen[id] then
        seen[id] = true
        due[#due + 1] = { id = id, seq = tonumber(redis.call('ZSCORE', K.order, id)) or 0 }
      end
    end
  end
  table.sort(due, function(a, b)
    if a.seq ~= b.seq then
      return a.seq < b.seq
    end
    return a.id < b.id
  end)
  local requeued, expired = {}, {}
  for _, d in ipairs(due) do
    local rec, how = load(d.id)
    if rec then
      local out = settle(d.id, rec, now)
      if out == 'gone' then
        expired[#expired + 1] = d.id
      elseif out == 'requeued' then
        requeued[#requeued + 1] = d.id
      end
    elseif how == 'unreadable' then
      -- Only the deadline is enforced on a record this code cannot read;
      -- its other index entries are dropped so they cannot stall the sweep.
      local dl = tonumber(redis.call('ZSCORE', K.deadline, d.id))
      if dl and dl <= now then
        drop(d.id, nil)
        expired[#expired + 1] = d.id
      else
        redis.call('ZREM', K.window, d.id)
        redis.call('ZREM', K.lease, d.id)
      end
    else
      -- An index entry without a job: repair.
      drop(d.id, nil)
    end
  end
  return requeued, expired
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

-- Remembered answers make a stamping write (one whose effect depends on the
-- clock) safe to re-run: the caller passes a fresh request id per call, a
-- re-run with the same id gets the first answer and changes nothing.
local function remembered()
  return redis.call('GET', K.req)
end

local function remember(answer)
  redis.call('SET', K.req, answer, 'PX', REQ_TTL_MS)
  return answer
end

-- Presence records hold PRESENCE_FIELDS: format, owner, device JSON,
-- lastSeenAt.
local function decode_presence(raw)
  local p = read_record(raw, PRESENCE_FIELDS)
  if not p or not is_int(p.seen) then
    return nil
  end
  return p
end

local function encode_presence(p)
  return write_record(p, PRESENCE_FIELDS, {})
end

-- stamp_presence sets a paired runner's last-seen time to now and says
-- whether the runner is paired; it never creates a presence.
local function stamp_presence(runner, now)
  local p = decode_presence(redis.call('HGET', K.presence, runner))
  if not p then
    return false
  end
  p.seen = ms(now)
  redis.call('HSET', K.presence, runner, encode_presence(p))
  return true
end

-- read_jobs returns, for each id, id, record, payload and result (false
-- where absent, and for the payload unless with_payload), flat.
local function read_jobs(ids, with_payload)
  local out = {}
  for _, id in ipairs(ids) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', K.job, id)
    out[#out + 1] = with_payload and redis.call('HGET', K.payload, id)
    out[#out + 1] = redis.call('HGET', K.result, id)
  end
  return out
end

-- id_of strips a lex member's list prefix and sequence.
local function id_of(member, prefix)
  return string.sub(member, #prefix + 17)
end

-- site_page reads a page of one site's jobs from a per-site lex index
-- (awaiting or finished). ARGV: site, last member read ('' for the start),
-- page size. Reply: {last member, then id, record, false, result...}: the
-- site sealed the payload itself and polls these listings, so they leave
-- the payload out.
local function site_page(index)
  local prefix = list_prefix(ARGV[1])
  local lo, hi = lex_range(prefix)
  if ARGV[2] ~= '' then
    lo = '(' .. ARGV[2]
  end
  local members = redis.call('ZRANGEBYLEX', index, lo, hi, 'LIMIT', 0, tonumber(ARGV[3]))
  local ids = {}
  for i, m in ipairs(members) do
    ids[i] = id_of(m, prefix)
  end
  local out = read_jobs(ids, false)
  table.insert(out, 1, members[#members] or '')
  return out
end

-- held_touching is held for a daemon call that may also stamp the
-- runner's presence: touch '1' stamps it first, whatever the outcome.
local function held_touching(id, runner, lease, touch, now)
  if touch == '1' then
    stamp_presence(runner, now)
  end
  return held(id, runner, lease, now)
end

-- each_grant visits the (job id, lease id) pairs of ARGV from index 3 on,
-- in order, each job live at now: visit gets the id and the record when
-- runner holds the job under that lease, else nil. An unreadable record
-- stops the walk, and its reply is returned.
local function each_grant(now, runner, visit)
  for i = 3, #ARGV - 1, 2 do
    local id, lease = ARGV[i], ARGV[i + 1]
    local rec, how = live(id, now)
    if how == 'unreadable' then
      return unreadable(id)
    end
    if rec and holder_refusal(rec, runner, lease) then
      rec = nil
    end
    visit(id, rec)
  end
  return nil
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

-- Pending device codes (spec protocol-2 §5.7), under the same prefix:
--   K.pairings          hash  device code -> pending record (PAIRING_FORMAT, PAIRING_FIELDS)
--   K.pairing_expiry    zset  device code, score = expiresAt on the store clock
--   K.pairing_identity  hash  device identity -> its one device code
--   K.pairing_user      zset  lex, score 0: lenc(user code) .. '|' .. seq16 .. device code
-- A start sets all four to expire with the last code to die, so nothing
-- lingers once no code is pending; expiry itself is judged on the clock.

-- pairing_read splits a pending record into a table by PAIRING_FIELDS, or
-- returns nil when it is not a record of PAIRING_FORMAT.
local function pairing_read(raw)
  local f = unframe(raw)
  if not f or #f < #PAIRING_FIELDS or f[1] ~= PAIRING_FORMAT then
    return nil
  end
  local rec = {}
  for i = 2, #PAIRING_FIELDS do
    rec[PAIRING_FIELDS[i]] = f[i]
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

-- pairing_drop removes one pending code from every index.
local function pairing_drop(device_code)
  local rec = pairing_read(redis.call('HGET', K.pairings, device_code))
  redis.call('HDEL', K.pairings, device_code)
  redis.call('ZREM', K.pairing_expiry, device_code)
  if rec then
    redis.call('ZREM', K.pairing_user, pairing_user_member(rec.user, rec.seq, device_code))
    if redis.call('HGET', K.pairing_identity, rec.identity) == device_code then
      redis.call('HDEL', K.pairing_identity, rec.identity)
    end
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

-- pairing_live returns {device code, record} for a code alive at now (a
-- code dies at its expiresAt), or nil.
local function pairing_live(device_code, now)
  local raw = redis.call('HGET', K.pairings, device_code)
  local rec = pairing_read(raw)
  if rec and tonumber(rec.expires) > now then
    return { device_code, raw }
  end
  return nil
end
