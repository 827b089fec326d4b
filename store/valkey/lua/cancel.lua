-- cancel: flag a site's job as cancelled. A queued job leaves its queue; a
-- held, unfinished one is listed for its holder.
-- ARGV: job id, site.
-- Reply: {'ok', exists '1'|'0'}.
-- Re-run: the flag is already set; nothing changes.
local now = clock_now()
local id, site = ARGV[1], ARGV[2]

local rec, how = live(id, now)
if how == 'unreadable' then
  return unreadable(id)
end
if not rec or rec.site ~= site then
  return { 'ok', '0' }
end
if rec.cancelled == '1' then
  return { 'ok', '1' }
end
rec.cancelled = '1'
if rec.state == STATE_QUEUED then
  queue_out(rec)
elseif rec.runner ~= '' and rec.state ~= STATE_DONE then
  redis.call('ZADD', K.cancels, 0, runner_member(rec, id))
end
save(id, rec)
return { 'ok', '1' }
