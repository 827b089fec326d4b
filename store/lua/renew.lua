-- renew: extend each named grant the runner still holds (renew_grants).
-- A: runner, lease_ms, proto, site ('' resolves lease first), then
--    grants: (job id, lease id) pairs from ARGV[A.grants] on.
-- Reply: {'ok', framed [job id, 'renewed'|'lost', expiresAt|'']...}.
-- Re-run: the answer is remembered (answer_once), so a re-run neither
-- moves an expiry again nor changes its answer.
local now = clock_now()
return { 'ok', frame(renew_grants(now, A.runner, tonumber(A.lease_ms), A.proto, A.site, A.grants)) }
