-- pair: record a pairing, creating the runner's presence or refreshing its
-- owner and keys (relayd G7), stamped with the store clock; capabilities
-- and withheld are replaced when given and kept when not (pair_presence).
-- A: runner, owner, device (JSON), caps (capabilities JSON), caps_given
--    '1'|'0', withheld (JSON), withheld_given '1'|'0'.
-- Reply: {'ok', presence record}.
-- Re-run: the answer is remembered (answer_once).
local now = clock_now()
return { 'ok', pair_presence(now, A.runner, A.owner, A.device, A.caps, A.caps_given, A.withheld, A.withheld_given) }
