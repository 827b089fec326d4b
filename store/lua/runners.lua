-- runners (read): a page of presences in first-pair order.
-- A: after (exclusive lower bound on the pairing sequence, '' for the
-- start), page (its size).
-- Reply: flat {runner, seq, record}...
local page = score_page(K.paired, A.after, A.page)
local out = {}
for i = 1, #page, 2 do
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', K.presence, page[i])
end
return out
