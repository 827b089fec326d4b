// The `control` launcher: the reference relay @byollm/relay 0.1.1 under Node,
// hosted by control-host.mjs on a free loopback port.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { start, stop, waitFor } from "../lib/proc.mjs";

const HOST = fileURLToPath(new URL("./control-host.mjs", import.meta.url));

export async function launch({ fixture, workDir }) {
  const fixturePath = join(workDir, "control-fixture.json");
  await writeFile(fixturePath, JSON.stringify(fixture, null, 2));
  const proc = start("control-relay", process.execPath, [HOST, fixturePath], {
    logPath: join(workDir, "control-relay.log"),
  });
  // The host prints its ports as one JSON line once it listens.
  const ports = await waitFor(
    "the control relay to listen",
    () => {
      if (proc.exit) throw new Error(`control relay exited: ${proc.err}`);
      // Only a complete line (newline-terminated) is parsed.
      const end = proc.out.indexOf("\n");
      return end >= 0 && JSON.parse(proc.out.slice(0, end));
    },
    { timeoutMs: 15_000 },
  );
  const url = `http://127.0.0.1:${ports.relay}`;
  const admin = `http://127.0.0.1:${ports.admin}`;

  return {
    name: "control",
    // One process serves both planes; relayd's replica launcher differs here.
    daemonUrl: url,
    siteUrl: url,
    auditUrls: [url],
    logs: ["control-relay"], // <workDir>/<name>.log, printed when a step fails
    /** The operator's approval: resolve the user code, write the device. */
    async approve({ userCode, owner, runnerId }) {
      const shown = await fetch(`${admin}/pairings/${encodeURIComponent(userCode)}`);
      if (shown.status !== 200) throw new Error(`user code ${userCode} is not pending (${shown.status})`);
      const { device } = await shown.json();
      const response = await fetch(`${admin}/approve`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ userCode, owner, runnerId }),
      });
      if (response.status !== 200) throw new Error(`approve answered ${response.status}: ${await response.text()}`);
      return { device }; // what the operator saw, for the fingerprint check
    },
    /** Which listeners still show the code as pending (the reference drops it once polled approved). */
    async pendingOn(userCode) {
      const shown = await fetch(`${admin}/pairings/${encodeURIComponent(userCode)}`);
      await shown.arrayBuffer();
      if (shown.status !== 200 && shown.status !== 404) throw new Error(`pairing lookup answered ${shown.status}`);
      return shown.status === 200 ? ["control"] : [];
    },
    stop: () => stop(proc),
  };
}
