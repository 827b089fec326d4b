-- cancel: flag a site's job as cancelled. A queued job leaves its queue; a
-- held one is listed for its holder (a proto-0 one only while unfinished).
-- A: id (the job's), site.
-- Reply: {'ok', exists '1'|'0'}.
-- Re-run: the answer is remembered (answer_once); unremembered, the
-- flag would already be set and the answer would be alike.
local now = clock_now()
local key = job_key(A.site, A.id)

local rec, how = live(key, now)
if how == 'unreadable' then
  return unreadable(key)
end
if not rec then
  return { 'ok', '0' }
end
if rec.cancelled == '1' then
  return { 'ok', '1' }
end
rec.cancelled = '1'
if rec.state == STATE_QUEUED then
  queue_out(key, rec)
elseif rec.runner ~= '' and (rec.state ~= STATE_DONE or rec.proto == '2') then
  redis.call('ZADD', K.cancels, 0, runner_member(rec, key))
end
save(key, rec)
return { 'ok', '1' }
