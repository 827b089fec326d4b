// One throwaway Valkey-protocol server for a run: valkey-server or
// redis-server from PATH, on a free loopback port, nothing persisted. A
// missing server fails the run; the suite never skips.
import { execFileSync } from "node:child_process";
import { createServer, connect } from "node:net";
import { join } from "node:path";
import { start, stop, waitFor } from "./proc.mjs";

function serverBinary() {
  for (const name of ["valkey-server", "redis-server"]) {
    try {
      return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
    } catch {
      // Not on PATH; try the next name.
    }
  }
  throw new Error("neither valkey-server nor redis-server is on PATH (Debian: apt-get install redis-server)");
}

// A loopback port free right now. The server may lose it to someone else
// before it binds, so startValkey tries again with another.
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

// True once the server answers PING with PONG.
function pong(port) {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk;
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

/** Start the server; returns {addr, stop}. */
export async function startValkey(workDir, name = "valkey") {
  const binary = serverBinary();
  let lastError;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = await freePort();
    const args = ["--port", String(port), "--bind", "127.0.0.1", "--dir", workDir, "--save", "", "--appendonly", "no", "--protected-mode", "no"];
    const proc = start(name, binary, args, { logPath: join(workDir, `${name}.log`) });
    try {
      await waitFor(
        `${name} on 127.0.0.1:${port} to answer PING`,
        async () => {
          if (proc.exit) throw new Error(`${name} exited (${JSON.stringify(proc.exit)}): ${proc.out.slice(-500)}`);
          return pong(port);
        },
        { timeoutMs: 10_000 },
      );
      return { addr: `127.0.0.1:${port}`, stop: () => stop(proc) };
    } catch (error) {
      lastError = error;
      await stop(proc);
    }
  }
  throw lastError;
}
