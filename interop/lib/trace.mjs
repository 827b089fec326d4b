// INTEROP_TRACE=1 for relayd: a loopback proxy in front of a relayd public
// listener that logs each request and answer, to diff with the control's
// trace. Sealed material and signatures are replaced by their length before
// they are logged, and headers (the request signatures) are never logged.
import { createServer } from "node:http";
import { createWriteStream } from "node:fs";

// Keys whose values the trace shows by size only.
const SEALED = new Set(["envelope", "ciphertext", "nonce", "payload", "encryptionSig", "signature", "deviceCode"]);
const clip = (text) => (text.length > 600 ? `${text.slice(0, 600)}…` : text);

// The body with every sealed field shown as its size only.
function redacted(text) {
  if (!text) return text;
  try {
    return JSON.stringify(JSON.parse(text), (key, value) =>
      SEALED.has(key) && value !== null ? `<${JSON.stringify(value).length} chars>` : value,
    );
  } catch {
    return `<${text.length} chars, not JSON>`;
  }
}

/** Serve a proxy to `target` on a free loopback port; returns {url, close}. */
export async function startTraceProxy(target, logPath) {
  const log = createWriteStream(logPath);
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    try {
      const hasBody = req.method !== "GET" && req.method !== "HEAD";
      const answer = await fetch(`${target}${req.url}`, { method: req.method, headers, ...(hasBody ? { body } : {}) });
      const text = await answer.text();
      log.write(`[trace] ${req.method} ${req.url} ${clip(redacted(body.toString("utf8")))} -> ${answer.status} ${clip(redacted(text))}\n`);
      const out = Object.fromEntries(answer.headers);
      delete out["content-length"];
      delete out["content-encoding"];
      delete out["transfer-encoding"];
      res.writeHead(answer.status, out).end(text);
    } catch (error) {
      log.write(`[trace] ${req.method} ${req.url} -> proxy failed: ${error.message}\n`);
      if (!res.headersSent) res.writeHead(502).end();
    }
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => {
          log.end();
          resolve();
        });
      }),
  };
}
