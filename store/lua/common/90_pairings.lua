-- Section 90, pairings: the pending device codes of the pairing flow (spec
-- protocol-2 §5.7), their records, indexes, expiry and lookups. It uses
-- the codec (section 20).

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

