-- Section 10, the clocks: the store clock (clock_now, Valkey TIME in ms),
-- the rate buckets' clock (clock_us) and take_token, the one rate limiter.
-- It uses nothing from earlier sections.

-- clock_now reads the store clock: Valkey TIME in ms. Each script calls it
-- once, at the top, and derives every decision from it. A store opened for
-- tests is built with testclock.lua's clock_now instead, which obeys the
-- test clock lever; production scripts have no such lever.
local function clock_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- clock_us reads the rate buckets' clock: Valkey TIME in microseconds,
-- which testclock.lua also replaces in a store opened for tests.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- take_token takes one request from the rate bucket at key, which holds
-- the instant (microseconds) it is full again, for a rate of one request
-- every `every` microseconds and bursts of `burst`. It answers 0 when a
-- request was taken, or how many microseconds until one can be. Taking
-- none writes nothing; the key expires once the bucket is full again,
-- which is the same as not existing, so idle callers cost nothing.
local function take_token(key, every, burst)
  local now = clock_us()
  local full = tonumber(redis.call('GET', key) or '') or now
  if full < now then
    full = now
  end
  local wait = full - now - (burst - 1) * every
  if wait > 0 then
    return wait
  end
  full = full + every
  redis.call('SET', key, string.format('%d', full), 'PX', math.ceil((full - now) / 1000))
  return 0
end

