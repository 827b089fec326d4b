// zodcheck: the differential oracle of differential_test.go. It reads
// lines {"s": schema, "b": body text} on stdin and writes, one line each,
// 1 when the published @byollm/protocol 0.1.1 schema accepts
// JSON.parse(body), 0 when it refuses, ? for a schema it does not know.
//
// Usage: node zodcheck.mjs <interop dir holding node_modules>
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const interop = process.argv[2];
const load = (rel) => import(pathToFileURL(join(interop, "node_modules", rel)).href);
const p = await load("@byollm/protocol/dist/index.js");
// The same module the protocol package imports, so schemas compose.
const { z } = await load("zod/index.js");

// The relay's own request schemas are not exported; these follow
// relay/site-plane.ts:70-103 and relay/daemon-plane.ts:1009-1015 from the
// published pieces.
const version = z.literal(p.PROTOCOL_VERSION);
const id = z.string().min(1);
const fixture = z.object({ protocolVersion: version, owner: id, device: p.PublicIdentity }).strict();
const anyOf = (...schemas) => ({ safeParse: (v) => ({ success: schemas.some((s) => s.safeParse(v).success) }) });
const pair = anyOf(p.PairStartRequest, p.PairPollRequest, fixture);

const schemas = {
  "pair/start": pair,
  "pair/poll": pair,
  pair: pair,
  claim: p.ClaimRequest,
  fetch: p.FetchRequest,
  result: p.ResultRequest,
  heartbeat: p.HeartbeatRequest,
  release: p.ReleaseRequest,
  "site/enqueue": z.object({ protocolVersion: version, siteId: id, stub: p.JobStub }).strict(),
  "site/payload": z.object({ protocolVersion: version, siteId: id, jobId: id, envelope: p.SealedEnvelope }).strict(),
  "site/cancel": z.object({ protocolVersion: version, siteId: id, jobId: id }).strict(),
  "pair/start response": p.PairStartResponse,
  "pair/poll response": p.PairPollResponse,
  "claim response": p.ClaimResponse,
  "fetch response": p.FetchResponse,
  "result response": p.ResultResponse,
  "heartbeat response": p.HeartbeatResponse,
  "release response": p.ReleaseResponse,
  error: p.WireError,
};

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const out = [];
for (const line of Buffer.concat(chunks).toString("utf8").split("\n")) {
  if (line === "") continue;
  const { s, b } = JSON.parse(line);
  const schema = schemas[s];
  if (schema === undefined) {
    out.push("?");
    continue;
  }
  let value;
  try {
    value = JSON.parse(b);
  } catch {
    out.push("0");
    continue;
  }
  out.push(schema.safeParse(value).success ? "1" : "0");
}
process.stdout.write(out.join("\n") + "\n");
