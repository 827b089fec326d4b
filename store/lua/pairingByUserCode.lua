-- pairingByUserCode: the first started live pending code with exactly
-- this user code (the caller normalises it).
-- A: user_code.
-- Reply: {device code, record, live codes of its identity}, or nil.
-- It changes nothing, but judges expiry on the store clock, so it reads it.
local now = clock_now()
local code = pairing_by_user(A.user_code, now, nil)
if code then
  return pairing_live(code, now)
end
return nil
