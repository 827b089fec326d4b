-- Section 60, what wraps a call: answer_once (the caller's memo of its
-- answers), runner presence records, and admit (the admission an
-- admitting script checks first). It uses the clocks and the codec
-- (sections 10 and 20).

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

