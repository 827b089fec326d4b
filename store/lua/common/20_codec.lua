-- Section 20, the codec: number formatting, framing, the self-delimiting
-- list prefixes and lex ranges that key every index, and the job record
-- (read_record, write_record, decode_job, encode_job). It uses the schema
-- definitions the loader generates from schema.go (FORMAT, FIELDS, ...).

-- ms formats an integer number of milliseconds without exponent notation.
local function ms(n)
  return string.format('%d', n)
end

-- frame joins strings as <length>:<bytes>..., which any byte survives.
local function frame(list)
  local parts = {}
  for i = 1, #list do
    local s = list[i]
    parts[i] = #s .. ':' .. s
  end
  return table.concat(parts)
end

-- unframe splits a framed string, or returns nil when it is not one. The
-- anchored pattern reads a length and its colon in one step.
local function unframe(raw)
  if type(raw) ~= 'string' then
    return nil
  end
  local out, pos, n, count = {}, 1, #raw, 0
  while pos <= n do
    local _, colon, digits = string.find(raw, '^(%d+):', pos)
    if not colon or #digits > 10 then
      return nil
    end
    local stop = colon + tonumber(digits)
    if stop > n then
      return nil
    end
    count = count + 1
    out[count] = string.sub(raw, colon + 1, stop)
    pos = stop + 1
  end
  return out
end

-- lenc makes a string self-delimiting, so concatenations of them are
-- unambiguous and no list prefix is a prefix of another.
local function lenc(s)
  return #s .. ':' .. s
end

-- unlenc reads the lenc'd string at pos of s, returning it and the
-- position after it, or nil when there is none.
local function unlenc(s, pos)
  local colon = string.find(s, ':', pos, true)
  if not colon then
    return nil
  end
  local n = tonumber(string.sub(s, pos, colon - 1))
  if not n then
    return nil
  end
  return string.sub(s, colon + 1, colon + n), colon + n + 1
end

-- job_key names a job by (site, id) in every hash and index.
local function job_key(site, id)
  return lenc(site) .. id
end

-- bare_id is the job id a job key names.
local function bare_id(key)
  local _, after = unlenc(key, 1)
  return string.sub(key, after or 1)
end

local function seq16(seq)
  return string.format('%016d', tonumber(seq))
end

-- queue_prefix names the claim queue of one protocol, site, owner and
-- kind; owner-only jobs ("self", "private") are kept apart because only
-- the owner's own devices may take them.
local function queue_prefix(proto, site, owner, kind, owner_only)
  local class = 'p'
  if owner_only then
    class = 's'
  end
  return lenc(proto) .. lenc(site) .. lenc(owner) .. lenc(kind) .. class .. '|'
end

local function list_prefix(name)
  return lenc(name) .. '|'
end

-- lex_range returns the ZRANGEBYLEX bounds of the members starting with a
-- prefix that ends in '|'.
local function lex_range(prefix)
  return '[' .. prefix, '(' .. string.sub(prefix, 1, -2) .. '}'
end

local function is_int(s)
  return type(s) == 'string' and string.find(s, '^%-?%d+$') ~= nil
end

-- read_record splits a record of a format (its first field) into a table
-- by build, one of the <list>_record functions the schema defines, and
-- returns the raw fields too; nil when it is not such a record. A record
-- must have required fields (fields added later read as '').
local function read_record(raw, format, required, build)
  local f = unframe(raw)
  if not f or #f < required or f[1] ~= format then
    return nil
  end
  return build(f), f
end

-- write_record frames rec's fields named by names, then the list extra.
local function write_record(rec, format, names, extra)
  local f = { format }
  for i = 2, #names do
    f[i] = rec[names[i]]
  end
  for i = 1, #extra do
    f[#names + i] = extra[i]
  end
  return frame(f)
end

-- decode_job returns the record, or nil when it is unreadable or of a format
-- this code does not know: such a record is never acted on but by its
-- deadline. Job records hold FIELDS, then the refusing runners.
local function decode_job(raw)
  local rec, f = read_record(raw, FORMAT, #FIELDS, FIELDS_record)
  if not rec then
    return nil
  end
  local refused = {}
  for i = #FIELDS + 1, #f do
    refused[i - #FIELDS] = f[i]
  end
  rec.refused = refused
  if not is_int(rec.seq) or not is_int(rec.deadline) then
    return nil
  end
  if (rec.lexp ~= '' and not is_int(rec.lexp)) or (rec.await ~= '' and not is_int(rec.await)) then
    return nil
  end
  if (rec.attempts ~= '' and not is_int(rec.attempts)) or (rec.runtil ~= '' and not is_int(rec.runtil)) then
    return nil
  end
  return rec
end

local function encode_job(rec)
  return write_record(rec, FORMAT, FIELDS, rec.refused)
end

