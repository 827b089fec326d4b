// verifygrant: the oracle of differential_test.go. It reads lines
// {"response": <claim response text>, "owner", "controlPlanePublic", "now"}
// on stdin and writes one verdict line each, as the published byollm 0.1.1
// daemon would decide: "malformed-response" when @byollm/protocol's strict
// ClaimResponse schema refuses the text, else, for its one job, the
// refusal of verifyGrant (the daemon's own call, daemon/runner.ts:1458-1468)
// or of the daemon's follow-up checks (wrong-user, wrong-site, wrong-kind,
// wrong-purpose; runner.ts:1484-1546), or "ok".
//
// Usage: node verifygrant.mjs <interop dir holding node_modules>
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const interop = process.argv[2];
// The daemon imports @byollm/protocol; npm dedupes it to the top level.
const p = await import(pathToFileURL(join(interop, "node_modules", "@byollm/protocol/dist/index.js")).href);

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const out = [];
for (const line of Buffer.concat(chunks).toString("utf8").split("\n")) {
  if (line === "") continue;
  const c = JSON.parse(line);
  const parsed = p.ClaimResponse.safeParse(JSON.parse(c.response));
  if (!parsed.success || parsed.data.jobs.length !== 1 || parsed.data.jobs[0].grant === undefined) {
    out.push("malformed-response");
    continue;
  }
  const job = parsed.data.jobs[0];
  const grant = job.grant;
  const refusal = p.verifyGrant({ grant, owner: c.owner, jobId: job.id, controlPlanePublic: c.controlPlanePublic, now: c.now });
  if (refusal !== null) out.push(refusal);
  else if (grant.user !== job.owner) out.push("wrong-user");
  else if (grant.site !== job.site) out.push("wrong-site");
  else if (grant.kind !== job.kind) out.push("wrong-kind");
  else if (grant.purpose !== (job.purpose ?? p.RESERVED_PURPOSE)) out.push("wrong-purpose");
  else out.push("ok");
}
process.stdout.write(out.join("\n") + "\n");
