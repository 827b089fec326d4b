-- job (read): one job's record, payload and result in one atomic view.
-- A: site, id (the job's).
-- Reply: {id, record|nil, payload|nil, result|nil}.
return read_jobs({ job_key(A.site, A.id) }, true)
