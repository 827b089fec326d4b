-- bucket: take one token from a caller's bucket, or say how long to wait.
-- KEYS[1]: the bucket, holding the instant (microseconds) it is full again.
-- KEYS[2]: the test clock lever (see testclock.lua), passed only by a
--          store opened for tests; production passes no KEYS[2], and the
--          clock is TIME alone.
-- ARGV[1]: microseconds between two tokens; ARGV[2]: tokens when full.
-- Reply: {1, 0} when a token was taken, {0, microseconds to wait} when not.
--
-- One call reads the clock once and decides from that one reading, so
-- every replica charging the same caller sees one bucket, on one clock.
-- A refusal writes nothing. The key expires when the bucket is full again,
-- which is the same as not existing, so idle callers cost nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lever = KEYS[2] and redis.call('GET', KEYS[2])
if lever then
  if string.sub(lever, 1, 1) == '@' then
    local pinned = tonumber(string.sub(lever, 2))
    if pinned then
      now = pinned * 1000
    end
  else
    now = now + (tonumber(lever) or 0) * 1000
  end
end

local every = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local full = tonumber(redis.call('GET', KEYS[1]) or '') or now
if full < now then
  full = now
end
local wait = full - now - (burst - 1) * every
if wait > 0 then
  return { 0, wait }
end
full = full + every
redis.call('SET', KEYS[1], string.format('%d', full), 'PX', math.ceil((full - now) / 1000))
return { 1, 0 }
