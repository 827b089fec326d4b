-- renew: extend each named grant the runner still holds (renew_grants).
-- ARGV: runner, leaseMs, proto, site ('' resolves lease first), then
--       (job id, lease id) pairs.
-- Reply: {'ok', framed [job id, 'renewed'|'lost', expiresAt|'']...}.
-- Re-run: the answer is remembered (answer_once), so a re-run neither
-- moves an expiry again nor changes its answer.
local now = clock_now()
return { 'ok', frame(renew_grants(now, ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], 5)) }
