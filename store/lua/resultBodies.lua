-- resultBodies (read): the records and results of some of a site's done
-- jobs, with the site's results version read in the same atomic view, so
-- a replica can tell that they belong to the listing it is building.
-- A: site, cap (bytes of records and results; the first job always fits),
-- then ids: job ids from ARGV[A.ids] on.
-- Reply: {version, count, then id, mark, record|false, result|false...}
-- for a prefix of the ids: the caller asks again for the rest. A job's
-- bytes are counted from what is read (two calls a job, not four): the
-- one job read past the cap is left out, not sent.
local site, cap = A.site, tonumber(A.cap)
local out = results_version(site)
local bytes = 0
for i = A.ids, #ARGV do
  local key = job_key(site, ARGV[i])
  local rec, res = redis.call('HGET', K.job, key), redis.call('HGET', K.result, key)
  bytes = bytes + #(rec or '') + #(res or '')
  if i > A.ids and bytes > cap then
    break
  end
  out[#out + 1] = ARGV[i]
  out[#out + 1] = redis.call('HGET', K.listing, key) or ''
  out[#out + 1] = rec
  out[#out + 1] = res
end
return out
