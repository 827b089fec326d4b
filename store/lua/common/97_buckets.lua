-- Section 97, sorted sets of buckets: the sharded layout's lists of the
-- buckets a runner holds grants in and its owners' route hints
-- (store/valkey/sharded.go, hints.go). It uses nothing before it.

-- bucket_set_answer answers the buckets of the sorted set under key as
-- held.lua and hinted.lua reply: {'ok', now, bucket...}, in bucket order.
local function bucket_set_answer(key, now)
  local out = redis.call('ZRANGE', key, 0, -1)
  table.sort(out, function(a, b) return tonumber(a) < tonumber(b) end)
  table.insert(out, 1, string.format('%d', now))
  table.insert(out, 1, 'ok')
  return out
end
