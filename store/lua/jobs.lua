-- jobs (read): a page of jobs in first-enqueue order.
-- A: after (exclusive lower bound on the sequence, '' for the start), page
-- (its size), cap (the page's bytes: records, payloads and results; one
-- job always fits, and a page cut short by it is followed by another).
-- Reply: flat {id, seq, record, payload, result}...
local page = score_page(K.order, A.after, A.page)
local cap = tonumber(A.cap)
local out, bytes = {}, 0
for i = 1, #page, 2 do
  local key = page[i]
  bytes = bytes + redis.call('HSTRLEN', K.job, key) + redis.call('HSTRLEN', K.payload, key) + redis.call('HSTRLEN', K.result, key)
  if i > 1 and bytes > cap then
    break
  end
  out[#out + 1] = bare_id(key)
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', K.job, key)
  out[#out + 1] = redis.call('HGET', K.payload, key)
  out[#out + 1] = redis.call('HGET', K.result, key)
end
return out
