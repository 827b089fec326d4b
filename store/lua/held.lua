-- held: a protocol-"2" runner's list of buckets in the sharded layout
-- (store/valkey/sharded.go): the sorted set K.held of the buckets it was
-- granted jobs in, each scored by the store time until which a heartbeat
-- and the runner's cancel requests visit it. Passes the call's admission
-- (its charge and presence stamp: a claim's or a heartbeat's, made here
-- so that the runner's group is called once), drops the entries whose
-- time is past, raises (never lowers) each given entry, and answers the
-- list.
-- KEYS: the fixed keys, then the runner's rate bucket (K.bucket) and its
-- list (K.held): a runner's list of buckets or an owner's route hints
-- (hints.go), which have the same shape.
-- A: ahead (ms), then pairs: from ARGV[A.pairs] on, (until, bucket)
-- pairs, an until of 0 meaning now plus ahead.
-- Reply: {'ok', now, bucket...}, the buckets in bucket order.
-- Re-run: raising to the same times again changes nothing.
local now = clock_now()
redis.call('ZREMRANGEBYSCORE', K.held, '-inf', '(' .. now)
for i = A.pairs, #ARGV, 2 do
  local at = tonumber(ARGV[i])
  if at == 0 then at = now + tonumber(A.ahead) end
  local was = redis.call('ZSCORE', K.held, ARGV[i + 1])
  if not was or tonumber(was) < at then
    redis.call('ZADD', K.held, at, ARGV[i + 1])
  end
end
-- The set goes when its last entry does, so that a runner or an owner
-- that stopped calling leaves nothing behind.
local last = redis.call('ZRANGE', K.held, -1, -1, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', K.held, last[2]) end
return bucket_set_answer(K.held, now)
