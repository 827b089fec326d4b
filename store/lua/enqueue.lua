-- enqueue: create a queued job of a protocol, or answer for the existing
-- (site, id) whatever its protocol.
-- A: id, site, stub (JSON), owner (the stub's), kind (the stub's),
--    owner_only '1'|'0', deadline (deadlineAt), proto.
-- Reply: {'ok', state, created '1'|'0'} or {'refused', REFUSED_ID_TAKEN}.
-- Re-run: the answer is remembered (answer_once); unremembered, the
-- second run would find the job and answer created '0'.
local now = clock_now()
local id, site, stub, owner, kind, owner_only, deadline, proto =
  A.id, A.site, A.stub, A.owner, A.kind, A.owner_only, A.deadline, A.proto
local key = job_key(site, id)

local rec, how = live(key, now)
if how == 'unreadable' then
  return unreadable(key)
end
if rec then
  return { 'ok', rec.state, '0' }
end
-- Protocol "0" keeps its one-site rule: an id another site's live proto-0
-- job holds is taken. The walk is as long as the sites using the id.
if proto == '0' then
  local prefix = list_prefix(id)
  local lo, hi = lex_range(prefix)
  for _, member in ipairs(redis.call('ZRANGEBYLEX', K.byid, lo, hi)) do
    local other = id_of(member, prefix)
    local orec, ohow = load(other)
    if ohow == 'unreadable' then
      return unreadable(other)
    end
    if orec and orec.proto == '0' and settled(other, orec, now) then
      return { 'refused', REFUSED_ID_TAKEN }
    end
  end
end

local seq = redis.call('INCR', K.seq)
rec = {
  site = site, seq = ms(seq), deadline = deadline, state = STATE_QUEUED, stub = stub,
  qm = queue_prefix(proto, site, owner, kind, owner_only == '1') .. seq16(seq) .. key,
  runner = '', cowner = '', device = '', lease = '', lexp = '', await = '',
  cancelled = '', disp = '', proto = proto, jowner = owner, attempts = '', reoffer = '', runtil = '', retry = '',
  refused = {},
}
save(key, rec)
redis.call('ZADD', K.order, seq, key)
redis.call('ZADD', K.deadline, deadline, key)
redis.call('ZADD', K.byid, 0, id_member(rec, key))
queue_in(key, rec, now)
return { 'ok', STATE_QUEUED, '1' }
