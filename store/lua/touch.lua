-- touch: stamp an existing presence's last-seen time with the store clock.
-- ARGV: runner.
-- Reply: {'ok', known '1'|'0'}.
-- Re-run: the answer is remembered under the request id (K.req).
local now = clock_now()
local memo = remembered()
if memo then
  return { 'ok', memo }
end

local runner = ARGV[1]
local p = decode_presence(redis.call('HGET', K.presence, runner))
if not p then
  return { 'ok', remember('0') }
end
p.seen = ms(now)
redis.call('HSET', K.presence, runner, encode_presence(p))
return { 'ok', remember('1') }
