-- touch: stamp an existing presence's last-seen time with the store clock.
-- ARGV: runner.
-- Reply: {'ok', known '1'|'0'}.
-- Re-run: the answer is remembered under the request id (K.req).
local now = clock_now()
local memo = remembered()
if memo then
  return { 'ok', memo }
end

if stamp_presence(ARGV[1], now) then
  return { 'ok', remember('1') }
end
return { 'ok', remember('0') }
