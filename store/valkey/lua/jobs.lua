-- jobs (read): a page of jobs in first-enqueue order.
-- ARGV: exclusive lower bound on the sequence ('' for the start), page size.
-- Reply: flat {id, seq, record, payload, result}...
local page = score_page(K.order)
local out = {}
for i = 1, #page, 2 do
  local key = page[i]
  out[#out + 1] = bare_id(key)
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', K.job, key)
  out[#out + 1] = redis.call('HGET', K.payload, key)
  out[#out + 1] = redis.call('HGET', K.result, key)
end
return out
