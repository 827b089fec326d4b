-- presence (read): one runner's presence record.
-- ARGV: runner.
-- Reply: the record, or nil.
return redis.call('HGET', K.presence, ARGV[1])
