// The published @byollm/control-plane 0.1.1 engine served as relayd's
// external grant author (spec grants.md G-R36): the reference GrantAuthor
// contract over HTTP, behind the shim the spec describes (parse the body,
// await the engine's authorGrant, stringify the answer), over a
// MemoryPolicyStore fed relayd's fixture shape (control-grants.mjs).
//
// Usage: node author-host.mjs <policy.json> <grant-key.pem> [<token-file>]
// With a token file, a call without "Authorization: Bearer <token>" gets
// 401. It prints its ports as one JSON line once it listens. The operator's
// side: PUT /policy replaces the store's policy (the relay's fixture stays
// as it is), GET /decisions is the engine's decision log.
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { GrantAuthor, signerFromPem } from "./control-grants.mjs";
import { serveAsChild } from "../lib/host.mjs";

const [policyPath, grantKeyPath, tokenPath] = process.argv.slice(2);
if (!policyPath || !grantKeyPath) {
  console.error("usage: author-host.mjs <policy.json> <grant-key.pem> [<token-file>]");
  process.exit(2);
}
const author = new GrantAuthor(signerFromPem(grantKeyPath), JSON.parse(readFileSync(policyPath, "utf8")));
const token = tokenPath ? readFileSync(tokenPath, "utf8").trim() : undefined;

async function bodyOf(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function reply(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

const authorServer = createServer(async (req, res) => {
  try {
    if (req.method !== "POST" || req.url !== "/grant") return reply(res, 404, { error: "not-found" });
    if (token !== undefined && req.headers.authorization !== `Bearer ${token}`) return reply(res, 401, { error: "unauthorized" });
    // The shim of G-R36: the engine's answer, unchanged.
    const input = JSON.parse(await bodyOf(req));
    reply(res, 200, await author.author(input));
  } catch (error) {
    console.error("[author] failed:", error);
    if (!res.headersSent) reply(res, 500, { error: "server-error" });
  }
});

const adminServer = createServer(async (req, res) => {
  try {
    if (req.method === "PUT" && req.url === "/policy") {
      author.setPolicy(JSON.parse(await bodyOf(req)));
      return reply(res, 200, { replaced: true });
    }
    if (req.method === "GET" && req.url === "/decisions") return reply(res, 200, author.decisions);
    return reply(res, 404, { error: "not-found" });
  } catch (error) {
    console.error("[author-admin] failed:", error);
    if (!res.headersSent) reply(res, 500, { error: "server-error" });
  }
});

await serveAsChild({ author: authorServer, admin: adminServer });
