// The `control` launcher: the reference relay @byollm/relay 0.1.1 under Node,
// hosted by control-host.mjs on a free loopback port.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { start, stop, waitFor } from "../lib/proc.mjs";

const HOST = fileURLToPath(new URL("./control-host.mjs", import.meta.url));

// The one relayd flag the control understands: the grants suite's
// `--grant-key-file`, which wires the reference relay to the published
// control plane signing with that key (control-grants.mjs). Any other flag is
// relayd's alone and refused here rather than silently dropped.
function grantKeyOf(extraArgs) {
  if (extraArgs.length === 0) return [];
  if (extraArgs.length === 2 && extraArgs[0] === "--grant-key-file") return [extraArgs[1]];
  throw new Error(`the control takes no relayd flags but --grant-key-file: ${extraArgs.join(" ")}`);
}

export async function launch({ fixture, workDir, extraArgs = [] }) {
  const fixturePath = join(workDir, "control-fixture.json");
  await writeFile(fixturePath, JSON.stringify(fixture, null, 2));
  const grantKey = grantKeyOf(extraArgs);
  const proc = start("control-relay", process.execPath, [HOST, fixturePath, ...grantKey], {
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
  const adminJson = async (path, init) => {
    const response = await fetch(`${admin}${path}`, init);
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
    return response.json();
  };

  return {
    name: "control",
    // One process serves both planes; relayd's replica launcher differs here.
    daemonUrl: url,
    siteUrl: url,
    auditUrls: [url],
    logs: ["control-relay"], // <workDir>/<name>.log, printed when a step fails
    /**
     * The operator's approval: resolve the user code, write the device. The
     * reference has one grant key for every device (`controlPlanePublic`),
     * so a per-device `grantKey` (relayd's DG2) has nothing to set here.
     */
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
    // The grants suite's operator side (control-host.mjs grantsAdmin).
    ...(grantKey.length === 0
      ? {}
      : {
          /** The policy in force, in relayd's fixture shape. */
          readFixture: () => adminJson("/fixture"),
          /** Replace the projection and the policy store at once. */
          writeFixture: (next) => adminJson("/fixture", { method: "PUT", body: JSON.stringify(next) }),
          /** Replace the policy store alone, the projection unchanged. */
          writePolicy: (next) => adminJson("/policy", { method: "PUT", body: JSON.stringify(next) }),
          /** The engine's decisions: {runnerId, user, jobId, granted, reason?, permanent?}. */
          decisions: () => adminJson("/decisions"),
          /** Claims the relay answered 200. */
          claims: async () => (await adminJson("/claims")).claims,
        }),
    stop: () => stop(proc),
  };
}
