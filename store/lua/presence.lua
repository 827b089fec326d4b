-- presence (read): one runner's presence record.
-- A: runner.
-- Reply: the record, or nil.
return redis.call('HGET', K.presence, A.runner)
