-- awaiting (read): a page of one site's jobs awaiting a payload, in
-- first-enqueue order.
-- ARGV: site, last member read ('' for the start), page size.
-- Reply: {last member, then id, record, payload, result...}.
local prefix = list_prefix(ARGV[1])
local lo, hi = lex_range(prefix)
if ARGV[2] ~= '' then
  lo = '(' .. ARGV[2]
end
local members = redis.call('ZRANGEBYLEX', K.awaiting, lo, hi, 'LIMIT', 0, tonumber(ARGV[3]))
local ids = {}
for i, m in ipairs(members) do
  ids[i] = id_of(m, prefix)
end
local out = read_jobs(ids)
table.insert(out, 1, members[#members] or '')
return out
