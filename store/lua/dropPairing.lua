-- dropPairing: spend a pending code (an approved poll does): delete it and
-- every other code of its device identity, so that no other code collects
-- the device once it has paired, and purge a few expired ones while here,
-- which nobody can see either way.
-- A: device_code.
-- Reply: {'ok'}; dropping an absent code is no error.
local now = clock_now()
local rec = pairing_read(redis.call('HGET', K.pairings, A.device_code))
pairing_drop(A.device_code)
if rec then
  for _, code in ipairs(pairing_codes_of(rec.identity)) do
    pairing_drop(code)
  end
  -- A code whose record is gone is left in no index either.
  redis.call('HDEL', K.pairing_identity, rec.identity)
end
pairing_purge(now, 16)
return { 'ok' }
