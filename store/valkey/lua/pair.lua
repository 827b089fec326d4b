-- pair: record a pairing, creating the runner's presence or refreshing its
-- owner and keys (relayd G7), stamped with the store clock.
-- ARGV: runner, owner, device JSON.
-- Reply: {'ok', presence record}.
-- Re-run: the answer is remembered under the request id (K.req).
local now = clock_now()
local memo = remembered()
if memo then
  return { 'ok', memo }
end

local runner, owner, device = ARGV[1], ARGV[2], ARGV[3]
if redis.call('ZSCORE', K.paired, runner) == false then
  redis.call('ZADD', K.paired, redis.call('INCR', K.seq), runner)
end
local raw = encode_presence({ owner = owner, device = device, seen = ms(now) })
redis.call('HSET', K.presence, runner, raw)
return { 'ok', remember(raw) }
