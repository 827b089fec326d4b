-- job (read): one job's record, payload and result in one atomic view.
-- ARGV: job id.
-- Reply: {id, record|nil, payload|nil, result|nil}.
return read_jobs({ ARGV[1] }, true)
