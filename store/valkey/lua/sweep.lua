-- sweep: apply the deadlines that are due, at most a batch from each
-- deadline index per call, then move up to a batch of jobs an older relay
-- left in the format-"1" keyspace.
-- Each call also takes a few queue counts again from their queues (see
-- recount_queues).
-- ARGV: batch.
-- Reply: {'ok', framed requeued ids, framed expired ids, framed lapsed
-- ids}, each in first-enqueue order.
-- Re-run: what the first run settled is no longer due.
local now = clock_now()
local batch = tonumber(ARGV[1])

-- recount_queues checks about n route counts against their queues, taking
-- the counts in turn across calls (the cursor is kept in field ''), so a
-- count a relay that kept none left wrong is mended within a few sweeps.
local function recount_queues(n)
  local scan = redis.call('HSCAN', K.qcount, redis.call('HGET', K.qcount, '') or '0', 'COUNT', n)
  redis.call('HSET', K.qcount, '', scan[1])
  local f = scan[2]
  for i = 1, #f - 1, 2 do
    if f[i] ~= '' then
      local size = route_size(f[i])
      if tonumber(f[i + 1]) ~= size then
        redis.call('HSET', K.qcount, f[i], size)
      end
    end
  end
end

local requeued, expired, lapsed = sweep(now, batch)
migrate_legacy(now, batch)
recount_queues(16)
return { 'ok', frame(requeued), frame(expired), frame(lapsed) }
