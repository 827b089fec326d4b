-- heartbeat: a daemon's heartbeat in one step. It stamps the runner's
-- presence (protocol "2" writes it as pair does; "0" stamps an existing
-- one as touch does), applies a batch of passed deadlines from each index
-- as a sweep would, then, when the runner serves a site, lists its cancel
-- requests and renews the grants it names.
-- ARGV: runner, proto, site ('' resolves lease first), stamp 'pair'|'touch',
--       owner, device JSON, capabilities JSON, given '1'|'0', withheld
--       JSON, given '1'|'0', serving '1'|'0', leaseMs, sweep batch, then
--       (job id, lease id) pairs.
-- Reply: {'ok', framed requeued ids, framed expired ids, framed lapsed ids,
-- framed [job id, lease id]... to cancel, framed [job id,
-- 'renewed'|'lost', expiresAt|'']... renewed}.
-- Re-run: the answer is remembered (answer_once).
local now = clock_now()
local runner, proto = ARGV[1], ARGV[2]
if ARGV[4] == 'pair' then
  pair_presence(now, runner, ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
else
  stamp_presence(runner, now)
end
local requeued, expired, lapsed = sweep(now, tonumber(ARGV[13]))
local cancel, renewed = {}, {}
if ARGV[11] == '1' then
  cancel = cancel_requests(now, runner, proto)
  renewed = renew_grants(now, runner, tonumber(ARGV[12]), proto, ARGV[3], 14)
end
return { 'ok', frame(requeued), frame(expired), frame(lapsed), frame(cancel), frame(renewed) }
