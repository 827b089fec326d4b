-- hinted: an owner's route hints in the sharded layout
-- (store/valkey/hints.go): drops from the sorted set K.held, there an
-- owner's hints, the buckets whose time (the store time until which a
-- claim visits the bucket for the owner's routes) is past, and answers
-- the rest. held.lua writes them.
-- A: none.
-- Reply: {'ok', now, bucket...}, the buckets in bucket order.
-- Re-run: drops nothing more, and answers the same buckets.
local now = clock_now()
redis.call('ZREMRANGEBYSCORE', K.held, '-inf', '(' .. now)
return bucket_set_answer(K.held, now)
