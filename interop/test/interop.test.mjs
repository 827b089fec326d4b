// The interop suite: the published 0.1.1 clients, unmodified, against one
// relay chosen by INTEROP_RELAY (control | relayd | relayd-valkey-3).
//
// Steps, in order (each test needs the one before it):
//   1. `byollm connect` is killed while it waits for approval, then a second
//      `byollm connect` (the same keys, a fresh start from the same address)
//      pairs through the device-code flow, approved by the launcher's
//      operator hook.
//   2. `byollm run` serves; the site SDK cancels one job (never to be
//      offered), enqueues JOBS jobs on the cloud lane and pumps until every
//      result is back, opened and verified.
//   3. `auditDeployment` sees exactly the loopback-http posture.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, rm, readFile } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { auditDeployment } from "@byollm/conformance";
import { keyId } from "@byollm/protocol";
import { launcherNamed } from "../launchers/index.mjs";
import { startModelServer, MODEL } from "../lib/model-server.mjs";
import { Daemon } from "../lib/daemon.mjs";
import { makeSite, siteApp, jobNumber } from "../lib/site.mjs";
import { stopAll, waitFor, withLogsFrom } from "../lib/proc.mjs";

const RELAY = process.env.INTEROP_RELAY ?? "control";
const JOBS = Number(process.env.INTEROP_JOBS ?? 24);
const SITE_ID = "site_interop";
const OWNER = "alice";
const RUNNER_ID = `runner_interop_${randomBytes(4).toString("hex")}`;
// Logs and the daemon's HOME live here, kept after the run for a post-mortem.
const WORK = fileURLToPath(new URL(`../.run/${RELAY}/`, import.meta.url));

const state = {};
const runStarted = Date.now();

before(async () => {
  await rm(WORK, { recursive: true, force: true });
  await mkdir(WORK, { recursive: true });
  state.model = await startModelServer();
  state.site = makeSite();
  // The projection a control plane would hold: one site, one consent. No
  // device yet; approving the pairing adds it.
  const fixture = {
    sites: [{ siteId: SITE_ID, site: state.site.identity }],
    consents: [{ owner: OWNER, siteId: SITE_ID }],
    devices: [],
  };
  const launchStarted = Date.now();
  state.relay = await launcherNamed(RELAY)({ fixture, workDir: WORK });
  console.log(`${RELAY}: launched in ${Date.now() - launchStarted} ms`);
  state.daemon = new Daemon(join(WORK, "daemon-home"));
  await state.daemon.configure(state.model.baseUrl);
  // A launcher may build relayd first (when INTEROP_RELAYD_BIN is unset).
}, { timeout: 180_000 });

after(async () => {
  // Everything we started goes, whatever happened above.
  await state.relay?.stop().catch(() => undefined);
  await stopAll();
  await state.model?.close();
  console.log(`${RELAY}: the whole run took ${((Date.now() - runStarted) / 1000).toFixed(1)} s of wall time`);
}, { timeout: 20_000 });

// Print a child's log tail when a step fails, so CI output says why.
const withLogs = withLogsFrom(WORK);

test("the clients under test are the published, pinned packages", async () => {
  const pins = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8")).dependencies;
  for (const [name, version] of Object.entries(pins)) {
    const installed = JSON.parse(await readFile(new URL(`../node_modules/${name}/package.json`, import.meta.url), "utf8"));
    assert.equal(installed.version, version, `${name} is installed at its pin`);
    assert.equal(version, "0.1.1", `${name} is pinned to 0.1.1`);
  }
  // @byollm/control-plane is the grants suite's control (grants/).
  assert.deepEqual(Object.keys(pins).sort(), ["@byollm/conformance", "@byollm/control-plane", "@byollm/protocol", "@byollm/relay", "@byollm/server", "byollm"]);
});

test(`${RELAY}: byollm connect pairs through the device-code flow, after a connect killed mid-pairing`, { timeout: 90_000 }, () =>
  withLogs(async () => {
    // The first connect dies before anyone approves it. Its code is pending
    // until the restarted daemon's fresh start (same persisted keys, same
    // address) replaces it.
    const killed = await state.daemon.connectThenKill(state.relay.daemonUrl, { logDir: WORK });
    assert.ok((await state.relay.pendingOn(killed.userCode)).length > 0, `the killed connect's code ${killed.userCode} is pending`);
    const { userCode, fingerprint, approved } = await state.daemon.connect(state.relay.daemonUrl, {
      logDir: WORK,
      approve: async (userCode) => {
        assert.notEqual(userCode, killed.userCode, "the restarted daemon started a fresh code");
        assert.deepEqual(await state.relay.pendingOn(killed.userCode), [], "the restart replaced the killed connect's code");
        return state.relay.approve({ userCode, owner: OWNER, runnerId: RUNNER_ID });
      },
    });
    // The operator approved the very device whose fingerprint the CLI printed
    // (the comparison a human makes), and it is the key the daemon holds.
    assert.ok(fingerprint, "the CLI printed the device fingerprint");
    assert.equal(keyId(approved.device.identity), fingerprint, "the approved device is the one on screen");
    assert.equal(approved.device.identity, await state.daemon.identityPublic(), "the approved identity is the daemon's own key");
    // The code is single-use: the poll that answered approved spent it, and
    // no listener (on relayd-valkey-3, no replica) still shows it.
    assert.deepEqual(await state.relay.pendingOn(userCode), [], `user code ${userCode} is spent once the daemon paired`);

    // The daemon stored what the approval said: our runner id, our owner,
    // and the site key it will pin (the SDK signs and seals with it).
    const stored = await state.daemon.pairings();
    const pairing = stored.pairings?.find((p) => p.origin === state.relay.daemonUrl);
    assert.ok(pairing, `pairings.json has ${state.relay.daemonUrl}: ${JSON.stringify(stored)}`);
    assert.equal(pairing.runnerId, RUNNER_ID);
    assert.equal(pairing.owner, OWNER);
    assert.deepEqual(
      pairing.sites,
      { [keyId(state.site.identity.identity)]: state.site.identity },
      "the approval pinned exactly our site, keyed by its key id",
    );
    state.paired = true;
  }, ["byollm-connect-killed", "byollm-connect", ...(state.relay?.logs ?? [])]),
);

test(`${RELAY}: byollm run serves ${JOBS} site SDK jobs, every result opened and verified`, { timeout: 100_000 }, () =>
  withLogs(async () => {
    assert.ok(state.paired, "the pairing step must pass first");
    // Issue 11 asks for at least 20 per run; a smaller INTEROP_JOBS is for a
    // quick local loop only, never for CI.
    if (process.env.CI) assert.ok(JOBS >= 20, `CI runs at least 20 jobs, not ${JOBS}`);
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.siteUrl });

    // One job the site cancels before any daemon runs: the relay must never
    // offer it. Were it claimed, the SDK would refuse to seal it (its local
    // record is canceled) and the `refused` check below would fail; its
    // prompt must never reach the model either.
    const doomedText = "interop job cancelled before any claim";
    const doomed = await app.enqueue({ kind: "llm.generate", owner: OWNER, payload: { prompt: doomedText } });
    await app.cancel(doomed.id);

    const run = state.daemon.run(WORK);

    const jobs = new Map(); // id -> expected text
    for (let n = 0; n < JOBS; n += 1) {
      const { input, expected } = jobNumber(n, OWNER);
      const handle = await app.enqueue(input);
      jobs.set(handle.id, expected);
    }
    assert.equal(jobs.size, JOBS, "every job got its own id");

    // Pump until each job has a terminal local state. A result the SDK could
    // not open or verify lands in `refused`, never in `completed`.
    // A non-retryable relay error makes pump() throw, and that fails the
    // test at once; retryable ones (429, 5xx) come back as `deferred`.
    const refused = new Set();
    const completed = new Set();
    const terminal = new Map();
    let pumps = 0;
    const deferred = [];
    await waitFor(
      `${JOBS} results`,
      async () => {
        if (run.exit) throw new Error(`byollm run exited: ${JSON.stringify(run.exit)}`);
        const report = await app.cloud.pump();
        pumps += 1;
        if (report.deferred) deferred.push(report.deferred);
        report.refused.forEach((id) => refused.add(id));
        report.completed.forEach((id) => completed.add(id));
        // A refused job never turns terminal: say so now, not at the timeout.
        if (refused.size > 0) throw new Error(`the SDK refused ${[...refused].join(", ")}`);
        for (const id of jobs.keys()) {
          if (terminal.has(id)) continue;
          const result = await app.result(id);
          if (result && result.state !== "queued" && result.state !== "claimed") terminal.set(id, result);
        }
        return terminal.size === jobs.size;
      },
      { timeoutMs: 85_000, intervalMs: 150 },
    );

    console.log(`${JOBS} jobs done in ${pumps} pumps; deferred ${deferred.length}: ${[...new Set(deferred)].join("; ")}`);
    assert.equal(completed.size, JOBS, "the SDK opened and verified every result envelope");
    for (const [id, expected] of jobs) {
      const result = terminal.get(id);
      assert.equal(result.state, "ok", `job ${id}: ${JSON.stringify(result)}`);
      assert.equal(result.outcome?.outcome, "ok", `job ${id} outcome`);
      assert.equal(result.outcome.text, expected, `job ${id} text`);
      // Provenance comes from the relay's results row and the sealed `ran`.
      assert.equal(result.provenance?.runnerId, RUNNER_ID, `job ${id} ran on our daemon`);
      assert.equal(result.provenance?.model, MODEL, `job ${id} model`);
    }
    assert.equal((await app.result(doomed.id))?.state, "canceled", "the cancelled job stays cancelled");
    const asked = JSON.stringify(state.model.calls);
    assert.ok(!asked.includes(doomedText), "the cancelled job never reached the model");
    // Every job really reached the model server (retries may add calls).
    assert.ok(state.model.calls.length >= JOBS, `model server saw ${state.model.calls.length} calls`);
  }, ["byollm-run", ...(state.relay?.logs ?? [])]),
);

test(`${RELAY}: auditDeployment — D001-D006 and D011 pass, D007-D010 cannot apply to loopback http`, { timeout: 20_000 }, async () => {
  for (const url of state.relay.auditUrls) {
    const report = await auditDeployment({ url });
    const byId = Object.fromEntries(report.results.map((r) => [r.id.slice(0, 4), r]));
    const summary = report.results.map((r) => `${r.id}: ${r.passed ? "pass" : r.measured === false ? "unmeasured" : "FAIL"} — ${r.detail}`).join("\n");
    console.log(`audit of ${url}\n${summary}`);
    assert.deepEqual(
      Object.keys(byId).sort(),
      ["D001", "D002", "D003", "D004", "D005", "D006", "D007", "D008", "D009", "D010", "D011"],
      "the audit ran exactly the eleven 0.1.1 checks",
    );
    for (const id of ["D001", "D002", "D003", "D004", "D005", "D006", "D011"]) {
      assert.equal(byId[id].passed, true, `${id} passes: ${byId[id].detail}`);
    }
    // D007 is measured and fails: an http:// origin has no TLS to check.
    assert.equal(byId.D007.passed, false);
    assert.notEqual(byId.D007.measured, false, "D007 is a measured result on http://");
    assert.match(byId.D007.detail, /this audit saw no TLS/);
    // D008-D010 need the origin's address behind an edge: unmeasured.
    for (const id of ["D008", "D009", "D010"]) {
      assert.equal(byId[id].passed, false, `${id} does not pass`);
      assert.equal(byId[id].measured, false, `${id} is unmeasured: ${byId[id].detail}`);
    }
    assert.equal(report.passed, false, "so the deployment as a whole does not pass");
  }
});
