// relayd as the suite runs it: the binary (built once per run, or the one
// INTEROP_RELAYD_BIN names), one process with its listeners on ports the
// kernel picks, and the operator's `relayd approve` command.
import { execFile } from "node:child_process";
import { access, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { keyId } from "@byollm/protocol";
import { start, stop, waitFor, exitOf } from "./proc.mjs";

// The repository root: the Go module, one level above interop/.
const REPO = fileURLToPath(new URL("../../", import.meta.url));

// relayd logs this message, with the bound addresses, once both listeners
// are up (internal/fleet reads the same line).
const SERVING = "relayd serving";

// What the daemon is shown as the place to approve; it only prints it.
export const VERIFICATION_URL = "http://127.0.0.1/approve";

/**
 * The relayd binary for this run: INTEROP_RELAYD_BIN when set (make interop
 * builds once for every launcher), else `go build` into workDir. A build
 * failure fails the run; nothing falls back.
 */
export async function relaydBinary(workDir) {
  const given = process.env.INTEROP_RELAYD_BIN;
  if (given) {
    await access(given).catch(() => {
      throw new Error(`INTEROP_RELAYD_BIN=${given} does not exist`);
    });
    return given;
  }
  const binary = join(workDir, "relayd");
  const started = Date.now();
  await new Promise((resolve, reject) => {
    execFile("go", ["build", "-o", binary, "./cmd/relayd"], { cwd: REPO, timeout: 240_000 }, (error, _out, err) =>
      error ? reject(new Error(`go build ./cmd/relayd failed: ${error.message}\n${err}`)) : resolve(),
    );
  });
  console.log(`built relayd in ${Date.now() - started} ms`);
  return binary;
}

/** Write the fixture where every replica reads it, and the approve command writes it. */
export async function writeFixture(workDir, fixture) {
  const path = join(workDir, "fixture.json");
  await writeFile(path, `${JSON.stringify(fixture, null, 2)}\n`);
  return path;
}

/**
 * Start one relayd serving "0" and "2" on loopback with `extraArgs` (the
 * store flags), and wait until its admin /readyz answers 200. Returns its
 * process and base URLs.
 */
export async function startRelayd({ name, binary, fixturePath, workDir, extraArgs = [] }) {
  const args = [
    "--protocols", "0,2",
    "--verification-url", VERIFICATION_URL,
    "--listen", "127.0.0.1:0",
    "--admin-listen", "127.0.0.1:0",
    "--fixture", fixturePath,
    // The v0 codec's one site; v2 routes every site in the fixture.
    "--site-id", "site_interop",
    // Nothing is in flight when the suite stops it; don't wait 20 s for it.
    "--shutdown-timeout", "2s",
    ...extraArgs,
  ];
  const proc = start(name, binary, args, { logPath: join(workDir, `${name}.log`) });
  const urls = await waitFor(
    `${name} to log "${SERVING}"`,
    () => {
      if (proc.exit) throw new Error(`${name} exited (${JSON.stringify(proc.exit)}):\n${proc.out}${proc.err}`);
      return servingLine(proc.out);
    },
    { timeoutMs: 20_000 },
  );
  await waitFor(
    `${name}'s /readyz to answer 200`,
    async () => {
      if (proc.exit) throw new Error(`${name} exited (${JSON.stringify(proc.exit)}):\n${proc.out}${proc.err}`);
      const response = await fetch(`${urls.admin}/readyz`).catch(() => undefined);
      return response?.status === 200;
    },
    { timeoutMs: 20_000 },
  );
  return { proc, ...urls, stop: () => stop(proc) };
}

// The serving line among relayd's JSON log lines, as base URLs; undefined
// until a complete one has been written.
function servingLine(out) {
  for (const line of out.split("\n").slice(0, -1)) {
    if (!line.includes(SERVING)) continue;
    const entry = JSON.parse(line);
    if (entry.msg === SERVING) return { public: `http://${entry.public}`, admin: `http://${entry.admin}` };
  }
  return undefined;
}

/**
 * Whether the admin listener at `admin` still shows `userCode` as pending:
 * true on 200, false on 404, and an error on anything else.
 */
export async function isPending(admin, userCode) {
  const response = await fetch(`${admin}/pairings/${encodeURIComponent(userCode)}`);
  await response.arrayBuffer();
  if (response.status === 200) return true;
  if (response.status === 404) return false;
  throw new Error(`GET ${admin}/pairings/${userCode} answered ${response.status}`);
}

/**
 * The operator's approval, as relayd's README tells an operator to do it:
 * look the user code up on an admin listener (that shows the device whose
 * fingerprint the daemon printed), then run
 *   relayd approve --admin <admin> --fixture <path> --owner <owner> --runner-id <id> <code>
 * which writes the device into the fixture. Returns {device}, the identity
 * the admin listener showed.
 */
export async function approveWithCommand({ binary, admin, fixturePath, workDir, userCode, owner, runnerId, grantKey }) {
  const shown = await fetch(`${admin}/pairings/${encodeURIComponent(userCode)}`);
  const shownText = await shown.text();
  if (shown.status !== 200) throw new Error(`GET ${admin}/pairings/${userCode} answered ${shown.status}: ${shownText}`);
  const { device } = JSON.parse(shownText);
  if (!device?.identity) throw new Error(`the admin listener showed no device for ${userCode}: ${shownText}`);

  const args = ["approve", "--admin", admin, "--fixture", fixturePath, "--owner", owner, "--runner-id", runnerId,
    // --grant-key KEY|none, when the caller chooses (docs/grants.md).
    ...(grantKey ? ["--grant-key", grantKey] : []), userCode];
  const proc = start("relayd-approve", binary, args, { logPath: join(workDir, "relayd-approve.log") });
  const exit = await exitOf(proc, 15_000).catch(async (error) => {
    await stop(proc);
    throw error;
  });
  if (exit.code !== 0) throw new Error(`relayd approve exited ${JSON.stringify(exit)}:\n${proc.out}${proc.err}`);
  // Its contract: one JSON line {"runnerId","owner","keyId"} on stdout.
  const lines = proc.out.trim().split("\n");
  if (lines.length !== 1) throw new Error(`relayd approve printed ${lines.length} lines, not one:\n${proc.out}`);
  const printed = JSON.parse(lines[0]);
  const expected = { runnerId, owner, keyId: keyId(device.identity) };
  for (const [field, value] of Object.entries(expected)) {
    if (printed[field] !== value) {
      throw new Error(`relayd approve printed ${field}=${JSON.stringify(printed[field])}, expected ${JSON.stringify(value)}: ${lines[0]}`);
    }
  }
  return { device };
}

/**
 * The answers one relayd process's public listener logged, from its log
 * file: relayd writes one "request" line per answered request, after it
 * answered. Only the client planes count (/byollm/ and /relay/): the admin
 * listener logs its lines the same way, and /metrics does not count them.
 * Returns {answered, fiveHundreds: [{path, status}]}. It reads a killed
 * process's log as well as a live one's.
 */
export async function loggedAnswers(logPath) {
  const text = await readFile(logPath, "utf8");
  let answered = 0;
  const fiveHundreds = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{") || !line.includes('"msg":"request"')) continue;
    const entry = JSON.parse(line);
    if (entry.msg !== "request" || !/^\/(byollm|relay)\//.test(entry.path)) continue;
    answered += 1;
    if (entry.status >= 500) fiveHundreds.push({ path: entry.path, status: entry.status });
  }
  return { answered, fiveHundreds };
}

/**
 * One scrape of a live process's /metrics on its admin listener, summed:
 * {answered, fiveHundreds, storeRetries} from relayd_http_requests_total (by
 * status) and relayd_store_retries_total.
 */
export async function scrapedAnswers(admin) {
  const response = await fetch(`${admin}/metrics`);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${admin}/metrics answered ${response.status}`);
  const sum = { answered: 0, fiveHundreds: 0, storeRetries: 0 };
  for (const line of text.split("\n")) {
    const sample = line.match(/^(relayd_http_requests_total|relayd_store_retries_total)\{([^}]*)\} (\S+)$/);
    if (!sample) continue;
    const value = Number(sample[3]);
    if (sample[1] === "relayd_store_retries_total") {
      sum.storeRetries += value;
      continue;
    }
    sum.answered += value;
    if (/status="5\d\d"/.test(sample[2])) sum.fiveHundreds += value;
  }
  return sum;
}

/**
 * The sum, over the admin listeners `admins`, of every metric series whose
 * name and labels start as `prefix` on /metrics.
 */
export async function metricSum(admins, prefix) {
  let sum = 0;
  for (const admin of admins) {
    const text = await (await fetch(`${admin}/metrics`)).text();
    for (const line of text.split("\n")) if (line.startsWith(prefix)) sum += Number(line.split(" ").pop());
  }
  return sum;
}
