-- job (read): one job's record, payload and result in one atomic view.
-- ARGV: site, job id.
-- Reply: {id, record|nil, payload|nil, result|nil}.
return read_jobs({ job_key(ARGV[1], ARGV[2]) }, true)
