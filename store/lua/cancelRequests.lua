-- cancelRequests: list the grants of the cancelled jobs of a protocol a
-- runner holds (cancel_requests).
-- A: runner, proto.
-- Reply: {'ok', job id, lease id, ...}.
-- Re-run: the answer is remembered (answer_once); unremembered, entries
-- the first run settled would be gone from the answer.
local now = clock_now()
local out = cancel_requests(now, A.runner, A.proto)
table.insert(out, 1, 'ok')
return out
