// One throwaway Valkey-protocol server for a run: valkey-server or
// redis-server from PATH, on a free loopback port, nothing persisted unless
// asked (the faults run keeps an AOF so a clean restart keeps every key). A
// missing server fails the run; the suite never skips.
import { execFileSync } from "node:child_process";
import { createServer, connect } from "node:net";
import { mkdir } from "node:fs/promises";
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

// The server's flags: nothing on disk, or with `persist` an AOF fsynced on
// every write in `dir`, so a clean SHUTDOWN and a start again on the same
// port and dir come back with every key.
function serverArgs(port, dir, persist) {
  const disk = persist ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"];
  return ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", ...disk, "--protected-mode", "no"];
}

// Start the server on `port` and wait until it answers PING; on failure it
// is stopped before the error goes up.
async function startOn(binary, port, { dir, persist, name, logPath }) {
  const proc = start(name, binary, serverArgs(port, dir, persist), { logPath });
  try {
    await waitFor(
      `${name} on 127.0.0.1:${port} to answer PING`,
      async () => {
        if (proc.exit) throw new Error(`${name} exited (${JSON.stringify(proc.exit)}): ${proc.out.slice(-500)}`);
        return pong(port);
      },
      { timeoutMs: 10_000 },
    );
    return proc;
  } catch (error) {
    await stop(proc);
    throw error;
  }
}

/**
 * Start the server; returns {addr, stop, restart}. With `persist`, its data
 * lives in an AOF under `<workDir>/<name>-data/`, and `restart({downMs})`
 * is a clean restart: SIGTERM (the server's own SHUTDOWN: it flushes the AOF
 * and exits), `downMs` with nothing listening, then the same binary on the
 * same port and dir. It resolves with the milliseconds nothing answered.
 */
export async function startValkey(workDir, name = "valkey", { persist = false } = {}) {
  const binary = serverBinary();
  const dir = persist ? join(workDir, `${name}-data`) : workDir;
  if (persist) await mkdir(dir, { recursive: true });
  let lastError;
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const port = await freePort();
    let proc;
    try {
      proc = await startOn(binary, port, { dir, persist, name, logPath: join(workDir, `${name}.log`) });
    } catch (error) {
      lastError = error;
      continue;
    }
    let restarts = 0;
    return {
      addr: `127.0.0.1:${port}`,
      stop: () => stop(proc),
      restart: async ({ downMs }) => {
        const exit = await stop(proc);
        if (exit.code !== 0) throw new Error(`${name} did not shut down cleanly: ${JSON.stringify(exit)}`);
        const down = Date.now();
        await new Promise((resolve) => setTimeout(resolve, downMs));
        restarts += 1;
        proc = await startOn(binary, port, { dir, persist, name, logPath: join(workDir, `${name}-${restarts + 1}.log`) });
        return Date.now() - down;
      },
    };
  }
  throw lastError;
}
