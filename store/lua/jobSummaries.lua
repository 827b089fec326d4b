-- jobSummaries (read): a page of jobs in first-enqueue order, with the
-- lengths of their payloads and results instead of the bodies, so the
-- debug page never reads a sealed body.
-- A: after (exclusive lower bound on the sequence, '' for the start), page
-- (its size).
-- Reply: flat {id, seq, record, payload length, result length}...
local page = score_page(K.order, A.after, A.page)
local out = {}
for i = 1, #page, 2 do
  local key = page[i]
  out[#out + 1] = bare_id(key)
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', K.job, key)
  out[#out + 1] = redis.call('HSTRLEN', K.payload, key)
  out[#out + 1] = redis.call('HSTRLEN', K.result, key)
end
return out
