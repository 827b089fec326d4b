-- sweep: apply the deadlines that are due, at most a batch from each
-- deadline index per call.
-- ARGV: batch.
-- Reply: {'ok', framed requeued ids, framed expired ids}, each in
-- first-enqueue order.
-- Re-run: what the first run settled is no longer due.
local now = clock_now()
local requeued, expired = sweep(now, tonumber(ARGV[1]))
return { 'ok', frame(requeued), frame(expired) }
