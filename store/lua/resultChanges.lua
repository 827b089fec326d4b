-- resultChanges (read): a page of what changed in one site's results
-- listing after a version number, from the journal K.changes, beside the
-- site's results version: a replica holding the listing at that version
-- reads these and the bodies of the jobs they name, not every id.
-- A: site, since (the version number held), kind: 'l' (live entries:
-- jobs listed now whose mark moved since) or 't' (tombstones: jobs gone
-- since), after (the last member read, '' for the start), page (its size).
-- Reply: {version, count, usable '1'|'0', last member, more '1'|'0', then
-- id, mark...}; mark is '' for a job gone. usable is '0' when the journal
-- does not hold every change since that version (a relay that keeps no
-- journal changed the listing, or old tombstones were dropped): read the
-- listing whole instead.
local site, since, kind = A.site, tonumber(A.since), A.kind
local out = results_version(site)
local n = version_number(out[1])
if out[1] == '' then
  n = 0
end
local held = tonumber(redis.call('HGET', K.listing, 'j|' .. site)) or 0
local horizon = tonumber(redis.call('HGET', K.listing, 'h|' .. site)) or 0
out[3], out[4], out[5] = '0', '', '0'
if not n or n ~= held or since < horizon then
  return out
end
out[3] = '1'
local prefix = journal_prefix(kind, site)
local lo, hi = '[' .. prefix .. seq16(since + 1), select(2, lex_range(prefix))
if A.after ~= '' then
  lo = '(' .. A.after
end
local page = tonumber(A.page)
local members = redis.call('ZRANGEBYLEX', K.changes, lo, hi, 'LIMIT', 0, page)
if #members == page then
  out[5] = '1'
end
for _, m in ipairs(members) do
  local key = string.sub(m, #prefix + 17)
  out[#out + 1] = bare_id(key)
  if kind == 'l' then
    out[#out + 1] = redis.call('HGET', K.listing, key) or ''
  else
    out[#out + 1] = ''
  end
  out[4] = m
end
return out
