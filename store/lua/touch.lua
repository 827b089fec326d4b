-- touch: stamp an existing presence's last-seen time with the store clock.
-- A: runner.
-- Reply: {'ok', known '1'|'0'}.
-- Re-run: the answer is remembered (answer_once).
local now = clock_now()
if stamp_presence(A.runner, now) then
  return { 'ok', '1' }
end
return { 'ok', '0' }
