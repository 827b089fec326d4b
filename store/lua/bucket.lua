-- bucket: take one request from a caller's rate bucket (the Limiter), or
-- say how long until one can be taken.
-- KEYS: the fixed keys, then the bucket (K.bucket).
-- A: every (microseconds between two requests), burst (requests when full).
-- Reply: {1, 0} when a request was taken, {0, microseconds to wait} when not.
--
-- The call reads the clock once and decides from that one reading, so
-- every replica charging the same caller sees one bucket on one clock: the
-- one an admission of the same caller charges too (admit).
local wait = take_token(K.bucket, tonumber(A.every), tonumber(A.burst))
if wait > 0 then
  return { 0, wait }
end
return { 1, 0 }
