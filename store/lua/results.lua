-- results (read): a page of one site's done jobs as ids and change marks,
-- in first-enqueue order, beside the site's results version, so a replica
-- fetches the bodies of only the jobs it has not seen (resultBodies).
-- ARGV: site, last member read ('' for the start), page size, page byte cap.
-- Reply: {version, count, last member, more '1'|'0', then id, mark...};
-- mark is '' for a job no relay marked.
local site = ARGV[1]
local prefix = list_prefix(site)
local lo, hi = lex_range(prefix)
if ARGV[2] ~= '' then
  lo = '(' .. ARGV[2]
end
local n, cap = tonumber(ARGV[3]), tonumber(ARGV[4])
local members = redis.call('ZRANGEBYLEX', K.finished, lo, hi, 'LIMIT', 0, n)
local out = results_version(site)
out[3], out[4] = '', '0'
if #members == n then
  out[4] = '1'
end
local bytes = 0
for _, m in ipairs(members) do
  local key = id_of(m, prefix)
  local mark = redis.call('HGET', K.listing, key) or ''
  out[#out + 1] = bare_id(key)
  out[#out + 1] = mark
  out[3] = m
  bytes = bytes + #m + #mark
  if bytes >= cap then
    out[4] = '1'
    break
  end
end
return out
