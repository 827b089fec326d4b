-- routes: store one claim's route fields as the set K.routes, which a
-- claim then names instead of sending them (claim.lua), for ROUTES_TTL_MS
-- after its last use.
-- A: fields: the route fields (route_field), each once, from
-- ARGV[A.fields] on.
-- Reply: {'ok'}.
-- Re-run: stores the same set again.
local ADD_CHUNK = 1000
redis.call('DEL', K.routes)
for lo = A.fields, #ARGV, ADD_CHUNK do
  redis.call('SADD', K.routes, unpack(ARGV, lo, math.min(lo + ADD_CHUNK - 1, #ARGV)))
end
redis.call('PEXPIRE', K.routes, ROUTES_TTL_MS)
return { 'ok' }
