-- pair: record a pairing, creating the runner's presence or refreshing its
-- owner and keys (relayd G7), stamped with the store clock; capabilities
-- and withheld are replaced when given and kept when not.
-- ARGV: runner, owner, device JSON, capabilities JSON, given '1'|'0',
--       withheld JSON, given '1'|'0'.
-- Reply: {'ok', presence record}.
-- Re-run: the answer is remembered (answer_once).
local now = clock_now()
local runner, owner, device = ARGV[1], ARGV[2], ARGV[3]
if redis.call('ZSCORE', K.paired, runner) == false then
  redis.call('ZADD', K.paired, redis.call('INCR', K.seq), runner)
end
local old = decode_presence(redis.call('HGET', K.presence, runner)) or { caps = '', withheld = '' }
local p = { owner = owner, device = device, seen = ms(now), caps = old.caps, withheld = old.withheld }
if ARGV[5] == '1' then
  p.caps = ARGV[4]
end
if ARGV[7] == '1' then
  p.withheld = ARGV[6]
end
local raw = encode_presence(p)
redis.call('HSET', K.presence, runner, raw)
return { 'ok', raw }
