-- startPairing: put a pending device code as the reference's put does
-- (spec protocol-2 §5.5): purge expired codes, drop the code of the same
-- device identity, refuse at capacity (the dropped code stays gone), then
-- insert, stamped with the store clock.
-- ARGV: device code, user code, identity, device JSON, label, platform,
--       capabilities ('' for none), ttl ms, capacity.
-- Reply: {'ok', expiresAt} or {'refused', REFUSED_AT_CAPACITY}.
-- Re-run: the answer is remembered (answer_once); unremembered, a re-run
-- would find its own code under its identity and put it again, stamped at
-- the re-run's time.
local now = clock_now()
local device_code, identity = ARGV[1], ARGV[3]
local ttl, capacity = tonumber(ARGV[8]), tonumber(ARGV[9])

pairing_purge(now, 64)
local held = redis.call('HGET', K.pairing_identity, identity)
if held then
  pairing_drop(held)
end
local live = redis.call('ZCOUNT', K.pairing_expiry, '(' .. ms(now), '+inf')
if live >= capacity then
  return { 'refused', REFUSED_AT_CAPACITY }
end

local expires = ms(now + ttl)
local rec = {
  user = ARGV[2], identity = identity, expires = expires, seq = tostring(redis.call('INCR', K.seq)),
  device = ARGV[4], label = ARGV[5], platform = ARGV[6], caps = ARGV[7],
}
redis.call('HSET', K.pairings, device_code, pairing_write(rec))
redis.call('ZADD', K.pairing_expiry, expires, device_code)
redis.call('HSET', K.pairing_identity, identity, device_code)
redis.call('ZADD', K.pairing_user, 0, pairing_user_member(rec.user, rec.seq, device_code))
-- Every key lives as long as its longest-lived code.
local last = redis.call('ZRANGE', K.pairing_expiry, -1, -1, 'WITHSCORES')[2]
for _, key in ipairs({ K.pairings, K.pairing_expiry, K.pairing_identity, K.pairing_user }) do
  redis.call('PEXPIREAT', key, last)
end
return { 'ok', expires }
