// relayd's external grant author for the grants suite: author-host.mjs, the
// published engine behind the shim of spec grants.md G-R36, on a free
// loopback port.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { start, stop, waitFor } from "../lib/proc.mjs";

const HOST = fileURLToPath(new URL("./author-host.mjs", import.meta.url));

/**
 * Start the author over `policy` (relayd's fixture shape), signing with the
 * PEM at `keyPath`, demanding the bearer token in `tokenPath` if given.
 * Returns {url, writePolicy(policy), decisions(), logs, stop}.
 */
export async function startAuthor({ policy, keyPath, tokenPath, workDir }) {
  const policyPath = join(workDir, "author-policy.json");
  await writeFile(policyPath, JSON.stringify(policy, null, 2));
  const proc = start("author", process.execPath, [HOST, policyPath, keyPath, ...(tokenPath ? [tokenPath] : [])], {
    logPath: join(workDir, "author.log"),
  });
  const ports = await waitFor(
    "the grant author to listen",
    () => {
      if (proc.exit) throw new Error(`the grant author exited: ${proc.err}`);
      const end = proc.out.indexOf("\n");
      return end >= 0 && JSON.parse(proc.out.slice(0, end));
    },
    { timeoutMs: 15_000 },
  );
  const admin = `http://127.0.0.1:${ports.admin}`;
  const adminJson = async (path, init) => {
    const response = await fetch(`${admin}${path}`, init);
    if (response.status !== 200) throw new Error(`author ${path} answered ${response.status}: ${await response.text()}`);
    return response.json();
  };
  return {
    url: `http://127.0.0.1:${ports.author}/grant`,
    logs: ["author"],
    /** Replace the engine's policy store; the relay's fixture is untouched. */
    writePolicy: (next) => adminJson("/policy", { method: "PUT", body: JSON.stringify(next) }),
    /** The engine's decisions: {runnerId, user, jobId, granted, reason?, permanent?}. */
    decisions: () => adminJson("/decisions"),
    stop: () => stop(proc),
  };
}
