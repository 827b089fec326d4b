-- resultBodies (read): the records and results of some of a site's done
-- jobs, with the site's results version read in the same atomic view, so
-- a replica can tell that they belong to the listing it is building.
-- ARGV: site, byte cap (records and results; the first job always fits),
-- then job ids.
-- Reply: {version, count, then id, mark, record|false, result|false...}
-- for a prefix of the ids: the caller asks again for the rest. A job's
-- bytes are counted from what is read (two calls a job, not four): the
-- one job read past the cap is left out, not sent.
local site, cap = ARGV[1], tonumber(ARGV[2])
local out = results_version(site)
local bytes = 0
for i = 3, #ARGV do
  local key = job_key(site, ARGV[i])
  local rec, res = redis.call('HGET', K.job, key), redis.call('HGET', K.result, key)
  bytes = bytes + #(rec or '') + #(res or '')
  if i > 3 and bytes > cap then
    break
  end
  out[#out + 1] = ARGV[i]
  out[#out + 1] = redis.call('HGET', K.listing, key) or ''
  out[#out + 1] = rec
  out[#out + 1] = res
end
return out
