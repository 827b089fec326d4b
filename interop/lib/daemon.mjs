// The real daemon CLI (`byollm` 0.1.1), run as its users run it, but with a
// HOME of its own so it never reads or writes the developer's ~/.byollm.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { start, waitFor, exitOf } from "./proc.mjs";
import { MODEL } from "./model-server.mjs";

// The package's own bin entry (dist/bin.js, beside its main), run with this
// Node: no global install, nothing from PATH.
const BIN = fileURLToPath(new URL("./bin.js", import.meta.resolve("byollm")));

// User codes are XXXX-XXXX over Crockford base32 without I, L, O, U.
const USER_CODE = /\b([0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4})\b/;
// Key ids and fingerprints: BYOLLM- and six groups of four.
const FINGERPRINT = /\b(BYOLLM(?:-[0-9A-Z]{4}){6})\b/;
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

export class Daemon {
  constructor(dir) {
    this.home = dir; // HOME for the child
    this.root = join(dir, ".byollm"); // BYOLLM_HOME, the daemon's state dir
  }

  /**
   * Write the owner's config: one openai-http service on our model server,
   * named `service` and offered at scope `offer` ("private" is the
   * daemon's default).
   */
  async configure(baseUrl, { service = "interop", offer } = {}) {
    await mkdir(this.root, { recursive: true });
    const config = {
      version: 1,
      services: {
        [service]: {
          type: "openai-http",
          baseUrl,
          model: MODEL,
          kinds: ["llm.generate", "llm.chat"],
          ...(offer ? { offer } : {}),
        },
      },
      // Several jobs in flight, so 20 jobs finish in seconds, not minutes.
      concurrency: 4,
      // The memory gate refuses jobs below a free-memory floor (2 GB by
      // default); a shared CI box must not turn that into flaky refusals.
      minAvailableMemoryBytes: 1,
    };
    await writeFile(join(this.root, "config.json"), `${JSON.stringify(config, null, 2)}\n`);
  }

  env() {
    const env = { ...process.env, HOME: this.home, BYOLLM_HOME: this.root, NO_COLOR: "1" };
    // A supervisor pid would make the CLI signal some other process.
    delete env.BYOLLM_SUPERVISOR_PID;
    return env;
  }

  spawn(name, args, logDir) {
    return start(name, process.execPath, [BIN, ...args], {
      env: this.env(),
      cwd: this.home,
      logPath: join(logDir, `${name}.log`),
    });
  }

  /**
   * Spawns `byollm connect <url>` logging as `logName` and waits for the user
   * code it prints; a connect that exits first fails.
   */
  async startConnect(url, logName, logDir, timeoutMs) {
    const proc = this.spawn(logName, ["connect", url, "--name", "interop-daemon"], logDir);
    const userCode = await waitFor(
      "the daemon to print a user code",
      () => {
        if (proc.exit) throw new Error(`connect exited early: ${proc.out}${proc.err}`);
        return proc.out.replace(ANSI, "").match(USER_CODE)?.[1];
      },
      { timeoutMs },
    );
    return { proc, userCode };
  }

  /**
   * `byollm connect <url>`: start the device-code flow, hand the printed user
   * code to `approve`, and wait for the poll to pair.
   */
  async connect(url, { approve, logDir, timeoutMs = 25_000, name, logName }) {
    const { proc, userCode } = await this.startConnect(url, logName ?? name ?? "byollm-connect", logDir, timeoutMs);
    const approved = await approve(userCode);
    const exit = await exitOf(proc, timeoutMs);
    const out = proc.out.replace(ANSI, "");
    if (exit.code !== 0 || !/paired as /.test(out)) {
      throw new Error(`connect did not pair (exit ${JSON.stringify(exit)}):\n${out}\n${proc.err}`);
    }
    // The device fingerprint the CLI shows its owner, to compare by eye with
    // what the approving screen shows.
    const fingerprint = out.match(FINGERPRINT)?.[1];
    return { userCode, fingerprint, approved, out };
  }

  /**
   * `byollm connect <url>` killed while it waits for approval: it prints a
   * user code, then dies with SIGKILL (a crash, a closed laptop lid), so
   * nothing it holds in memory survives. Returns the code it printed.
   */
  async connectThenKill(url, { logDir, timeoutMs = 25_000 }) {
    const { proc, userCode } = await this.startConnect(url, "byollm-connect-killed", logDir, timeoutMs);
    // SIGKILL to its group at once: no handler runs, nothing is tidied up.
    process.kill(-proc.child.pid, "SIGKILL");
    await proc.exited;
    return { userCode };
  }

  /** `byollm run`: the foreground loop. Never `start`, which installs a service. */
  run(logDir, name = "byollm-run") {
    return this.spawn(name, ["run"], logDir);
  }

  /** `byollm status`: what the CLI tells its owner, ANSI stripped. */
  async status(logDir, name = "byollm-status") {
    const proc = this.spawn(name, ["status"], logDir);
    const exit = await exitOf(proc, 20_000);
    if (exit.code !== 0) throw new Error(`byollm status exited ${JSON.stringify(exit)}:\n${proc.out}${proc.err}`);
    return proc.out.replace(ANSI, "");
  }

  /** The daemon's own public identity key, from its key file (secret halves are not kept). */
  async identityPublic() {
    return JSON.parse(await readFile(join(this.root, "keys.json"), "utf8")).identityPublic;
  }

  /** What the daemon stored when it paired (runner id, owner, pinned sites). */
  async pairings() {
    return JSON.parse(await readFile(join(this.root, "pairings.json"), "utf8"));
  }
}
