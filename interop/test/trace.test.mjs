// The INTEROP_TRACE proxy must pass requests and answers through unchanged
// and must never write sealed material, signatures or device codes to its
// log: only their sizes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTraceProxy } from "../lib/trace.mjs";

test("the trace proxy relays exactly and logs sealed fields by size only", async () => {
  const secret = "SEALED-CIPHERTEXT-THAT-MUST-NOT-BE-LOGGED";
  const answer = JSON.stringify({ deviceCode: "DEVICE-CODE-SECRET", envelope: { ciphertext: secret }, state: "ready" });
  const seen = [];
  const upstream = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    seen.push({ url: req.url, signature: req.headers["x-byollm-signature"], body: Buffer.concat(chunks).toString("utf8") });
    res.writeHead(201, { "content-type": "application/json" }).end(answer);
  });
  await new Promise((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const dir = await mkdtemp(join(tmpdir(), "interop-trace-"));
  const logPath = join(dir, "trace.log");
  const proxy = await startTraceProxy(`http://127.0.0.1:${upstream.address().port}`, logPath);
  try {
    const body = JSON.stringify({ protocolVersion: "2", envelope: { ciphertext: secret, nonce: "NONCE-SECRET" } });
    const response = await fetch(`${proxy.url}/relay/site/payload?x=1`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-byollm-signature": "SIGNATURE-SECRET" },
      body,
    });
    assert.equal(response.status, 201);
    assert.equal(await response.text(), answer, "the answer passes through unchanged");
    assert.deepEqual(seen, [{ url: "/relay/site/payload?x=1", signature: "SIGNATURE-SECRET", body }], "the request passes through unchanged");
  } finally {
    await proxy.close();
    await new Promise((resolve) => upstream.close(resolve));
  }
  const log = await readFile(logPath, "utf8");
  await rm(dir, { recursive: true, force: true });
  assert.match(log, /POST \/relay\/site\/payload\?x=1 .* -> 201 /, "the exchange is logged");
  assert.match(log, /"state":"ready"/, "plain fields are logged");
  for (const hidden of [secret, "NONCE-SECRET", "SIGNATURE-SECRET", "DEVICE-CODE-SECRET"]) {
    assert.ok(!log.includes(hidden), `the log never holds ${hidden}`);
  }
});
