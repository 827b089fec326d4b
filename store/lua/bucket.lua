-- bucket: take one request from a caller's rate bucket (the Limiter), or
-- say how long until one can be taken.
-- KEYS: the fixed keys, then the bucket (K.bucket).
-- ARGV: microseconds between two requests, requests when full.
-- Reply: {1, 0} when a request was taken, {0, microseconds to wait} when not.
--
-- The call reads the clock once and decides from that one reading, so
-- every replica charging the same caller sees one bucket on one clock: the
-- one an admission of the same caller charges too (admit).
local wait = take_token(K.bucket, tonumber(ARGV[1]), tonumber(ARGV[2]))
if wait > 0 then
  return { 0, wait }
end
return { 1, 0 }
