-- sweep: apply the deadlines that are due, at most a batch from each
-- deadline index per call, then move up to a batch of jobs an older relay
-- left in the format-"1" keyspace.
-- A mending call also takes a few queue counts again from their queues
-- (see recount_queues) and takes a few more routes' census
-- (census_queues): the first call once mend_every ms have passed since
-- the last mending one, whichever relay made it (field 'mended').
-- A: batch, mend (how many routes to mend), mend_every (ms).
-- Reply: {'ok', framed requeued ids, framed expired ids, framed lapsed
-- ids}, each in first-enqueue order.
-- Re-run: what the first run settled is no longer due.
local now = clock_now()
local batch, mend, mend_every = tonumber(A.batch), tonumber(A.mend), tonumber(A.mend_every)

-- recount_queues checks about n route counts against their queues, taking
-- the counts in turn across calls (the cursor is kept in field ''), so a
-- count a relay that kept none left wrong is mended within a few sweeps.
-- A count found right is still mended when the route is wrongly in or out
-- of K.busy; a route holding work found out of it means a writer that
-- keeps no K.busy (an older relay) is about, so claims read the counts
-- again until the census has passed once more.
local function recount_queues(n)
  local scan = redis.call('HSCAN', K.qcount, redis.call('HGET', K.qcount, '') or '0', 'COUNT', n)
  redis.call('HSET', K.qcount, '', scan[1])
  local f, fields, counts = scan[2], {}, {}
  for i = 1, #f - 1, 2 do
    if route_from(f[i]) then
      fields[#fields + 1], counts[#fields + 1] = f[i], tonumber(f[i + 1])
    end
  end
  if #fields == 0 then
    return
  end
  local busy = redis.call('SMISMEMBER', K.busy, unpack(fields))
  for i, field in ipairs(fields) do
    local size = route_size(field)
    if counts[i] ~= size or (busy[i] == 1) ~= (size > 0) then
      if size > 0 and busy[i] ~= 1 then
        redis.call('SREM', K.busy, '')
      end
      set_count(field, size)
    end
  end
end

-- census_queues visits up to n routes that have entries in K.queue, in
-- turn across calls (the cursor is kept in field 'census'), jumping a
-- route at a time, and mends each one's count and place in K.busy. Each
-- pass that ends marks K.busy complete (member ''): every route holding
-- work was then counted, those filled before counts were kept included.
local function census_queues(n)
  local from = redis.call('HGET', K.qcount, 'census') or '-'
  if not string.find(from, '^[%(%[%-]') then
    from = '-' -- a cursor a relay that knows no census overwrote
  end
  for _ = 1, n do
    local m = redis.call('ZRANGEBYLEX', K.queue, from, '+', 'LIMIT', 0, 1)[1]
    if not m then
      redis.call('SADD', K.busy, '')
      from = '-'
      break
    end
    local field = route_field_of(m)
    if field then
      local size = route_size(field)
      local missing = redis.call('SISMEMBER', K.busy, field) == 0
      if missing then
        redis.call('SREM', K.busy, '') -- as recount_queues says
      end
      if missing or tonumber(redis.call('HGET', K.qcount, field)) ~= size then
        set_count(field, size)
      end
      from = '(' .. field .. '\255'
    else
      from = '(' .. m
    end
  end
  redis.call('HSET', K.qcount, 'census', from)
end

local requeued, expired, lapsed = sweep(now, batch)
migrate_legacy(now, batch)
if now - (tonumber(redis.call('HGET', K.qcount, 'mended')) or 0) >= mend_every then
  redis.call('HSET', K.qcount, 'mended', now)
  recount_queues(mend)
  census_queues(mend)
end
return { 'ok', frame(requeued), frame(expired), frame(lapsed) }
