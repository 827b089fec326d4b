-- approvePairing: mark approved the first started live code with exactly
-- this user code and this device identity, the one an operator looked at.
-- A: user_code, identity (the device's).
-- Reply: {device code, record, live codes of its identity}, or nil when
-- there is no such code. Marking again rewrites the same record, so a
-- re-run is harmless; the keys keep their expiry.
local now = clock_now()
local identity = A.identity
local code, rec = pairing_by_user(A.user_code, now, function(r) return r.identity == identity end)
if not code then
  return nil
end
rec.approved = '1'
redis.call('HSET', K.pairings, code, pairing_write(rec))
return pairing_live(code, now)
