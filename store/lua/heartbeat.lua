-- heartbeat: a daemon's heartbeat in one step. It stamps the runner's
-- presence when asked (protocol "0"; protocol "2" writes it through its
-- admission), applies a batch of passed deadlines from each index as a
-- sweep would, then, when the runner serves a site, lists its cancel
-- requests and renews the grants it names.
-- A: runner, proto, site ('' resolves lease first), touch '1'|'0',
--    serving '1'|'0', lease_ms, batch (the sweep's), sites: those whose
--    grants may be renewed ('*' for any, else framed ids: served_sites),
--    then grants: (job id, lease id) pairs from ARGV[A.grants] on.
-- Reply: {'ok', framed requeued ids, framed expired ids, framed lapsed ids,
-- framed [job id, lease id]... to cancel, framed [job id,
-- 'renewed'|'lost', expiresAt|'']... renewed}.
-- Re-run: the answer is remembered (answer_once).
local now = clock_now()
local runner, proto = A.runner, A.proto
if A.touch == '1' then
  stamp_presence(runner, now)
end
local requeued, expired, lapsed = sweep(now, tonumber(A.batch))
local cancel, renewed = {}, {}
if A.serving == '1' then
  cancel = cancel_requests(now, runner, proto)
  renewed = renew_grants(now, runner, tonumber(A.lease_ms), proto, A.site, A.grants, served_sites(A.sites))
end
return { 'ok', frame(requeued), frame(expired), frame(lapsed), frame(cancel), frame(renewed) }
