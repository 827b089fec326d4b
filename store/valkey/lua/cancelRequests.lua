-- cancelRequests: list the grants of the cancelled jobs of a protocol a
-- runner holds, in first-enqueue order, applying each one's passed
-- deadlines first (those of its other protocol's list too, so that every
-- store settles the same jobs in the same call). Proto 0 leaves finished
-- jobs out (design G11); proto 2 lists them (spec protocol-2 ST14).
-- ARGV: runner, proto.
-- Reply: {'ok', job id, lease id, ...}.
-- Re-run: the answer is remembered (answer_once); unremembered, entries
-- the first run settled would be gone from the answer.
local now = clock_now()
local runner, proto = ARGV[1], ARGV[2]

local out = { 'ok' }
for _, p in ipairs({ '0', '2' }) do
  local prefix = list_prefix(p .. runner)
  local lo, hi = lex_range(prefix)
  for _, member in ipairs(redis.call('ZRANGEBYLEX', K.cancels, lo, hi)) do
    local key = id_of(member, prefix)
    local rec, how = live(key, now)
    if how ~= 'unreadable' then
      if rec and rec.runner == runner and rec.cancelled == '1' and (rec.state ~= STATE_DONE or p == '2')
          and runner_member(rec, key) == member then
        if p == proto then
          out[#out + 1] = bare_id(key)
          out[#out + 1] = rec.lease
        end
      else
        -- No longer this runner's to stop (finished, requeued, dropped or
        -- a new job under the key); a cancelled job is never granted
        -- again, so the entry cannot come back to life.
        redis.call('ZREM', K.cancels, member)
      end
    end
  end
end
return out
