-- The test clock: the clock_now a store opened for tests is built with, in
-- place of the shared one's. Tests write K.clock to move the store clock:
-- '<n>' adds n ms to Valkey TIME, '@<ms>' pins it there; an absent key
-- leaves TIME as it is. Production scripts are never built with this.
local function clock_now()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local lever = redis.call('GET', K.clock)
  if lever then
    if string.sub(lever, 1, 1) == '@' then
      return tonumber(string.sub(lever, 2)) or now
    end
    return now + (tonumber(lever) or 0)
  end
  return now
end

-- clock_us is clock_now's twin for the rate buckets, in microseconds, moved
-- by the same lever.
local function clock_us()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local lever = redis.call('GET', K.clock)
  if lever then
    if string.sub(lever, 1, 1) == '@' then
      local pinned = tonumber(string.sub(lever, 2))
      if pinned then
        return pinned * 1000
      end
      return now
    end
    return now + (tonumber(lever) or 0) * 1000
  end
  return now
end
