-- startPairing: put a pending device code (store.Pairings.StartPairing):
-- purge expired codes, drop the codes of the same device identity started
-- from the same origin (a restarted daemon replaces its own code; the
-- reference drops every code of the identity, spec §5.5) and the
-- identity's dead ones, refuse when the identity still has per_device live
-- codes or at capacity (the dropped codes stay gone), then insert, stamped
-- with the store clock.
-- A: device_code, user_code, identity, device (JSON), label, platform,
--    caps (capabilities, '' for none), ttl (ms), capacity, origin,
--    known (at start, '1' or '0'), per_device (0 or less: unbounded).
-- Reply: {'ok', expiresAt} or {'refused', REFUSED_AT_CAPACITY}.
-- Re-run: the answer is remembered (answer_once); unremembered, a re-run
-- would find its own code under its identity and origin and put it again,
-- stamped at the re-run's time.
local now = clock_now()
local device_code, identity, origin = A.device_code, A.identity, A.origin
local ttl, capacity, per_device = tonumber(A.ttl), tonumber(A.capacity), tonumber(A.per_device)

pairing_purge(now, 64)
for _, code in ipairs(pairing_codes_of(identity)) do
  local rec = pairing_read(redis.call('HGET', K.pairings, code))
  if not rec then
    pairing_unindex(identity, code)
  elseif rec.origin == origin or tonumber(rec.expires) <= now then
    pairing_drop(code)
  end
end
if per_device > 0 and #pairing_codes_of(identity) >= per_device then
  return { 'refused', REFUSED_AT_CAPACITY }
end
local live = redis.call('ZCOUNT', K.pairing_expiry, '(' .. ms(now), '+inf')
if live >= capacity then
  return { 'refused', REFUSED_AT_CAPACITY }
end

local expires = ms(now + ttl)
local rec = {
  user = A.user_code, identity = identity, expires = expires, seq = tostring(redis.call('INCR', K.seq)),
  device = A.device, label = A.label, platform = A.platform, caps = A.caps,
  origin = origin, known = A.known, approved = '0',
}
redis.call('HSET', K.pairings, device_code, pairing_write(rec))
redis.call('ZADD', K.pairing_expiry, expires, device_code)
local codes = pairing_codes_of(identity)
codes[#codes + 1] = device_code
redis.call('HSET', K.pairing_identity, identity, table.concat(codes, ','))
redis.call('ZADD', K.pairing_user, 0, pairing_user_member(rec.user, rec.seq, device_code))
-- Every key lives as long as its longest-lived code.
local last = redis.call('ZRANGE', K.pairing_expiry, -1, -1, 'WITHSCORES')[2]
for _, key in ipairs({ K.pairings, K.pairing_expiry, K.pairing_identity, K.pairing_user }) do
  redis.call('PEXPIREAT', key, last)
end
return { 'ok', expires }
