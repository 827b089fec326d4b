-- pairingByDeviceCode: the live pending code with this device code.
-- A: device_code.
-- Reply: {device code, record, live codes of its identity}, or nil when
-- absent or expired.
-- It changes nothing, but judges expiry on the store clock, so it reads it.
local now = clock_now()
return pairing_live(A.device_code, now)
