-- Section 70, reads: job and listing pages (read_jobs, site_page,
-- score_page, results_version), and the walk over the grants a daemon call
-- names (held_touching, each_grant). It uses sections 20 to 60.

-- read_jobs returns, for each job key, the bare id, record, payload and
-- result (false where absent, and for the payload unless with_payload),
-- flat.
local function read_jobs(keys, with_payload)
  local out = {}
  for _, key in ipairs(keys) do
    out[#out + 1] = bare_id(key)
    out[#out + 1] = redis.call('HGET', K.job, key)
    out[#out + 1] = with_payload and redis.call('HGET', K.payload, key)
    out[#out + 1] = redis.call('HGET', K.result, key)
  end
  return out
end

-- id_of strips a lex member's list prefix and sequence, leaving the job
-- key.
local function id_of(member, prefix)
  return string.sub(member, #prefix + 17)
end

-- results_version reads what a replica's cached results listing of a site
-- is checked by: the site's results version and how many jobs it lists
-- (which also catches jobs finished by a relay that keeps no version).
local function results_version(site)
  local lo, hi = lex_range(list_prefix(site))
  return { redis.call('HGET', K.listing, 'v|' .. site) or '', tostring(redis.call('ZLEXCOUNT', K.finished, lo, hi)) }
end

-- site_page reads a page of one site's jobs from a per-site lex index
-- (awaiting or finished): those of site after the last member read ('' for
-- the start), at most page of them and of cap bytes (records and results;
-- one job always fits).
-- Reply: {last member, more '1'|'0', then id, record, false, result...}:
-- the site sealed the payload itself and polls these listings, so they
-- leave the payload out.
local function site_page(index, site, after, page, cap)
  local prefix = list_prefix(site)
  local lo, hi = lex_range(prefix)
  if after ~= '' then
    lo = '(' .. after
  end
  local n = tonumber(page)
  cap = tonumber(cap)
  local members = redis.call('ZRANGEBYLEX', index, lo, hi, 'LIMIT', 0, n)
  local ids, bytes, last = {}, 0, ''
  for _, m in ipairs(members) do
    local key = id_of(m, prefix)
    bytes = bytes + redis.call('HSTRLEN', K.job, key) + redis.call('HSTRLEN', K.result, key)
    if #ids > 0 and bytes > cap then
      break
    end
    ids[#ids + 1] = key
    last = m
  end
  local more = '0'
  if #ids < #members or #members == n then
    more = '1'
  end
  local out = read_jobs(ids, false)
  table.insert(out, 1, more)
  table.insert(out, 1, last)
  return out
end

-- held_touching is held for a daemon call that may also stamp the
-- runner's presence: touch '1' stamps it first, whatever the outcome.
local function held_touching(proto, site, id, runner, lease, touch, now, sites)
  if touch == '1' then
    stamp_presence(runner, now)
  end
  return held(proto, site, id, runner, lease, now, sites)
end

-- each_grant visits the (job id, lease id) pairs of ARGV from index first
-- on, in order, each job of proto resolved as held does (site '' for lease
-- first) and live at now: visit gets the id, then the key and the record
-- when runner holds the job under that lease, else nils. Every pair is
-- resolved, its record decoded (and its deadlines applied), before visit
-- runs for any, so no write of the call comes before a record it has yet
-- to read; a record this code cannot read counts as not held, and never
-- fails the call halfway. A job named twice is visited with its one
-- record, checked again each time.
local function each_grant(now, proto, site, runner, first, visit)
  local grants, by_key = {}, {}
  for i = first, #ARGV - 1, 2 do
    local id, lease = ARGV[i], ARGV[i + 1]
    local key, rec = resolve(proto, site, id, runner, lease, now)
    if rec then
      by_key[key] = by_key[key] or rec
      rec = by_key[key]
    end
    grants[#grants + 1] = { id = id, lease = lease, key = key, rec = rec }
  end
  for _, g in ipairs(grants) do
    if g.rec and not holder_refusal(g.rec, runner, g.lease) then
      visit(g.id, g.key, g.rec)
    else
      visit(g.id)
    end
  end
end

-- score_page reads a page of a score-ordered index: at most page entries
-- scored above after ('' for the start). It returns the flat {member,
-- score...} page.
local function score_page(index, after, page)
  local lo = '-inf'
  if after ~= '' then
    lo = '(' .. after
  end
  return redis.call('ZRANGEBYSCORE', index, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(page))
end

