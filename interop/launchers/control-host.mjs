// The control relay: @byollm/relay 0.1.1 is a library (a fetch-style
// `handle(Request)`), not a server, so this child process puts it on a
// loopback port. It also opens a second loopback port, the operator's side,
// because the reference relay has no HTTP route for approving a pairing: the
// only way to learn which device a user code stands for is the library call
// `PairingCodes.byUserCode`, and approval is a projection write.
//
// With a grant key (the grants suite), the relay is wired to the published
// control plane as its README shows: `controlPlanePublic` and `authorGrant`
// from a ControlPlane over a MemoryPolicyStore (control-grants.mjs). The
// fixture given here is then relayd's, policy included; the relay projects
// it stripped, the store gets the policy, and the operator's side can
// replace both during a run.
//
// Usage: node control-host.mjs <fixture.json> [<grant-key.pem>]
// Prints one JSON line {"relay": port, "admin": port} once both listen.
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { Relay, MemoryPairingCodes } from "@byollm/relay";
import { GrantAuthor, referenceFixture, signerFromPem } from "./control-grants.mjs";
import { serveAsChild } from "../lib/host.mjs";

const [fixturePath, grantKeyPath] = process.argv.slice(2);
if (!fixturePath) {
  console.error("usage: control-host.mjs <fixture.json> [<grant-key.pem>]");
  process.exit(2);
}
let fixture = JSON.parse(readFileSync(fixturePath, "utf8"));
const author = grantKeyPath ? new GrantAuthor(signerFromPem(grantKeyPath), fixture) : null;
// What the reference relay may be given: relayd's policy fields refused (G-R25).
const projected = (f) => (author ? referenceFixture(f) : f);
// Claims the relay answered 200, the control's counterpart of relayd's
// relayd_http_requests_total{route="claim",status="200"}.
let claimsServed = 0;

// Our own code store, so the admin side can resolve user codes. Same class
// and defaults the relay would create for itself.
const codes = new MemoryPairingCodes();
const relay = new Relay({
  fixture: projected(fixture),
  pairingCodes: codes,
  ...(author ? { controlPlanePublic: author.publicKey, authorGrant: (input) => author.author(input) } : {}),
  // Without it `start` answers 501. The daemon requires a parseable URL; it
  // only prints it.
  verificationUrl: "http://127.0.0.1/approve",
});

// Node's http request -> WHATWG Request, the shape Relay.handle takes.
async function toRequest(req, origin) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (Array.isArray(value)) value.forEach((v) => headers.append(name, v));
    else if (value !== undefined) headers.set(name, value);
  }
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  return new Request(new URL(req.url, origin), {
    method: req.method,
    headers,
    ...(hasBody ? { body } : {}),
  });
}

async function send(res, response) {
  const text = await response.text();
  const headers = Object.fromEntries(response.headers);
  res.writeHead(response.status, headers);
  res.end(text);
}

const json = (status, body) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });

// INTEROP_TRACE=1 logs every exchange to stderr (the launcher's log file):
// the reference's answers, to diff against relayd's.
const TRACE = process.env.INTEROP_TRACE === "1";
const clip = (text) => (text.length > 600 ? `${text.slice(0, 600)}…` : text);

const relayServer = createServer(async (req, res) => {
  try {
    const origin = `http://${req.headers.host ?? "127.0.0.1"}`;
    const request = await toRequest(req, origin);
    const sent = TRACE ? await request.clone().text() : "";
    const response = await relay.handle(request);
    if (response.status === 200 && request.method === "POST" && new URL(request.url).pathname.endsWith("/claim")) claimsServed += 1;
    if (TRACE) {
      const answer = await response.clone().text();
      console.error(`[trace] ${req.method} ${req.url} ${clip(sent)} -> ${response.status} ${clip(answer)}`);
    }
    await send(res, response);
  } catch (error) {
    // The reference has no catch-all (spec S31); say so on stderr and answer
    // 500 rather than dropping the connection.
    console.error("[control] handler threw:", error);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

// The operator's listener. GET /pairings/<userCode> shows what is waiting
// (never the device code); POST /approve {userCode, owner, runnerId} writes
// the device into the projection, which the daemon's next poll reads.
const adminServer = createServer(async (req, res) => {
  try {
    const url = new URL(req.url, "http://127.0.0.1");
    if (req.method === "GET" && url.pathname.startsWith("/pairings/")) {
      const userCode = decodeURIComponent(url.pathname.slice(10));
      const pending = await codes.byUserCode(userCode);
      if (!pending) return send(res, json(404, { error: "not-found" }));
      const { deviceCode: _secret, ...shown } = pending;
      return send(res, json(200, shown));
    }
    if (req.method === "POST" && url.pathname === "/approve") {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const { userCode, owner, runnerId } = JSON.parse(
        Buffer.concat(chunks).toString("utf8"),
      );
      const pending = await codes.byUserCode(String(userCode));
      if (!pending) return send(res, json(404, { error: "not-found" }));
      fixture = {
        ...fixture,
        devices: [
          ...(fixture.devices ?? []),
          { owner, runnerId, device: pending.device },
        ],
      };
      relay.project(projected(fixture));
      return send(res, json(200, { approved: runnerId, owner }));
    }
    if (author) {
      const answer = await grantsAdmin(req, url);
      if (answer) return send(res, answer);
    }
    return send(res, json(404, { error: "not-found" }));
  } catch (error) {
    console.error("[control-admin] failed:", error);
    if (!res.headersSent) res.writeHead(500).end();
  }
});

// The grants suite's operator side: GET/PUT /fixture reads and replaces the
// whole policy (projection and store at once, as relayd rereads its file),
// PUT /policy the store's alone;
// GET /decisions is the author's decision log; GET /claims the count above.
async function grantsAdmin(req, url) {
  if (url.pathname === "/fixture" && req.method === "GET") return json(200, fixture);
  if (url.pathname === "/fixture" && req.method === "PUT") {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const next = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    relay.project(projected(next));
    author.setPolicy(next);
    fixture = next;
    return json(200, { replaced: true });
  }
  // PUT /policy replaces the policy store alone, the projection unchanged:
  // the routing and the author's facts then differ (T3 (b)).
  if (url.pathname === "/policy" && req.method === "PUT") {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    author.setPolicy(JSON.parse(Buffer.concat(chunks).toString("utf8")));
    return json(200, { replaced: true });
  }
  if (url.pathname === "/decisions" && req.method === "GET") return json(200, author.decisions);
  if (url.pathname === "/claims" && req.method === "GET") return json(200, { claims: claimsServed });
  return null;
}

await serveAsChild({ relay: relayServer, admin: adminServer });
