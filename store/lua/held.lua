-- held: a protocol-"2" runner's list of buckets in the sharded layout
-- (store/valkey/sharded.go): the sorted set K.held of the buckets it was
-- granted jobs in, each scored by the store time until which a heartbeat
-- and the runner's cancel requests visit it. Drops the entries whose time
-- is past, raises (never lowers) each given entry, and answers the list.
-- KEYS: the fixed keys, then the runner's list (K.held).
-- A: margin (ms), then pairs: from ARGV[A.pairs] on, (until, bucket)
-- pairs, an until of 0 meaning now plus the margin.
-- Reply: the buckets listed, in bucket order.
-- Re-run: raising to the same times again changes nothing.
local now = clock_now()
redis.call('ZREMRANGEBYSCORE', K.held, '-inf', '(' .. now)
for i = A.pairs, #ARGV, 2 do
  local at = tonumber(ARGV[i])
  if at == 0 then at = now + tonumber(A.margin) end
  local was = redis.call('ZSCORE', K.held, ARGV[i + 1])
  if not was or tonumber(was) < at then
    redis.call('ZADD', K.held, at, ARGV[i + 1])
  end
end
local out = redis.call('ZRANGE', K.held, 0, -1)
table.sort(out, function(a, b) return tonumber(a) < tonumber(b) end)
return out
