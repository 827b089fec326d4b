-- sweep: apply the deadlines that are due, at most a batch from each
-- deadline index per call, then move up to a batch of jobs an older relay
-- left in the format-"1" keyspace.
-- ARGV: batch.
-- Reply: {'ok', framed requeued ids, framed expired ids, framed lapsed
-- ids}, each in first-enqueue order.
-- Re-run: what the first run settled is no longer due.
local now = clock_now()
local batch = tonumber(ARGV[1])
local requeued, expired, lapsed = sweep(now, batch)
migrate_legacy(now, batch)
return { 'ok', frame(requeued), frame(expired), frame(lapsed) }
