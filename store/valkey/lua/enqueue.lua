-- enqueue: create a queued job, or answer for the existing one.
-- ARGV: id, site, stub JSON, stub owner, stub kind, stub audience, deadlineAt.
-- Reply: {'ok', state, created '1'|'0'} or {'refused', REFUSED_ID_TAKEN}.
-- Re-run: the second run finds the job and changes nothing.
local now = clock_now()
local id, site, stub, owner, kind, audience, deadline = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

local rec, how = live(id, now)
if how == 'unreadable' then
  return unreadable(id)
end
if rec then
  if rec.site ~= site then
    return { 'refused', REFUSED_ID_TAKEN }
  end
  return { 'ok', rec.state, '0' }
end

local seq = redis.call('INCR', K.seq)
rec = {
  site = site, seq = ms(seq), deadline = deadline, state = STATE_QUEUED, stub = stub,
  qm = queue_prefix(site, owner, kind, audience == 'self') .. seq16(seq) .. id,
  runner = '', cowner = '', device = '', lease = '', lexp = '', await = '',
  cancelled = '', disp = '', refused = {},
}
save(id, rec)
redis.call('ZADD', K.order, seq, id)
redis.call('ZADD', K.deadline, deadline, id)
queue_in(rec)
return { 'ok', STATE_QUEUED, '1' }
