-- pair: record a pairing, creating the runner's presence or refreshing its
-- owner and keys (relayd G7), stamped with the store clock; capabilities
-- and withheld are replaced when given and kept when not (pair_presence).
-- ARGV: runner, owner, device JSON, capabilities JSON, given '1'|'0',
--       withheld JSON, given '1'|'0'.
-- Reply: {'ok', presence record}.
-- Re-run: the answer is remembered (answer_once).
local now = clock_now()
return { 'ok', pair_presence(now, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]) }
