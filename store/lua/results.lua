-- results (read): a page of one site's done jobs as ids and change marks,
-- in first-enqueue order, beside the site's results version, so a replica
-- fetches the bodies of only the jobs it has not seen (resultBodies).
-- A: site, after (the last member read, '' for the start), page (its
-- size), cap (the page's bytes).
-- Reply: {version, count, last member, more '1'|'0', then id, mark...};
-- mark is '' for a job no relay marked.
local site = A.site
local prefix = list_prefix(site)
local lo, hi = lex_range(prefix)
if A.after ~= '' then
  lo = '(' .. A.after
end
local n, cap = tonumber(A.page), tonumber(A.cap)
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
