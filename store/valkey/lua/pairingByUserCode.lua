-- pairingByUserCode: the first started live pending code with exactly
-- this user code (the caller normalises it).
-- ARGV: user code.
-- Reply: {device code, record}, or nil.
-- It changes nothing, but judges expiry on the store clock, so it reads it.
local now = clock_now()
local prefix = list_prefix(ARGV[1])
local from, to = lex_range(prefix)
-- Only codes sharing this user code are read: a collision is rare, and
-- expired entries leave at the next start's purge.
local entries = redis.call('ZRANGEBYLEX', K.pairing_user, from, to, 'LIMIT', 0, 32)
for i = 1, #entries do
  local found = pairing_live(string.sub(entries[i], #prefix + 17), now)
  if found then
    return found
  end
end
return nil
