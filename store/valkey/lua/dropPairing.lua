-- dropPairing: delete a pending code (an approved poll spends it), and
-- purge a few expired ones while here, which nobody can see either way.
-- ARGV: device code.
-- Reply: {'ok'}; dropping an absent code is no error.
local now = clock_now()
pairing_drop(ARGV[1])
pairing_purge(now, 16)
return { 'ok' }
