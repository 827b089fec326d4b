-- cancelRequests: list the unfinished cancelled jobs a runner holds, in
-- first-enqueue order, applying each one's passed deadlines first.
-- ARGV: runner.
-- Reply: {'ok', job id, lease id, ...}.
-- Re-run: entries the first run settled are gone; nothing else changes.
local now = clock_now()
local runner = ARGV[1]

local prefix = list_prefix(runner)
local lo, hi = lex_range(prefix)
local out = { 'ok' }
for _, member in ipairs(redis.call('ZRANGEBYLEX', K.cancels, lo, hi)) do
  local id = id_of(member, prefix)
  local rec, how = live(id, now)
  if how ~= 'unreadable' then
    if rec and rec.runner == runner and rec.cancelled == '1' and rec.state ~= STATE_DONE
        and runner_member(rec, id) == member then
      out[#out + 1] = id
      out[#out + 1] = rec.lease
    else
      -- No longer this runner's to stop (finished, requeued, dropped or a
      -- new job under the id); a cancelled job is never granted again, so
      -- the entry cannot come back to life.
      redis.call('ZREM', K.cancels, member)
    end
  end
end
return out
