// The published clients through faults (issue 23): two `byollm` 0.1.1
// daemons and the `@byollm/server` 0.1.1 site SDK against three relayd
// replicas on one Valkey that keeps an AOF, every client through one
// round-robin load balancer (lib/balancer.mjs). While the jobs run, Valkey
// is restarted cleanly twice (down about 1 s each) and two replicas are
// killed with SIGKILL and replaced. The run passes only if
//   - the site collects, opens and verifies every job's result: none lost;
//   - no relayd process answered any request with a 5xx, outages included,
//     counted at the relay: from every process's own log (the killed ones
//     too, whose counters died with them), and for the live ones also from
//     their /metrics scrape, which must agree with their log;
//   - the outages were felt: the store retried calls through them.
//
// It runs only for INTEROP_RELAY=relayd-valkey-3: the control (the
// reference relay) and the `relayd` launcher have no Valkey to restart.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, rm, readFile } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { launchFaults } from "../launchers/relayd.mjs";
import { loggedAnswers, scrapedAnswers } from "../lib/relayd.mjs";
import { startModelServer, MODEL } from "../lib/model-server.mjs";
import { Daemon } from "../lib/daemon.mjs";
import { makeSite, siteApp, jobNumber } from "../lib/site.mjs";
import { stopAll, stop, waitFor } from "../lib/proc.mjs";

const RELAY = process.env.INTEROP_RELAY ?? "control";
const RUNS = RELAY === "relayd-valkey-3";
const SKIP = RUNS
  ? false
  : `the faults run restarts relayd's Valkey and kills its replicas; the ${RELAY} launcher has no Valkey (only relayd-valkey-3 runs it)`;
const JOBS = Number(process.env.INTEROP_FAULT_JOBS ?? 60);
const BATCHES = 5; // the faults fall between batches, each while jobs are in flight
const OUTAGE_MS = 1000;
const SITE_ID = "site_interop";
const OWNER = "alice";
const WORK = fileURLToPath(new URL(`../.run/${RELAY}-faults/`, import.meta.url));

const state = { daemons: [], runs: [] };
const runStarted = Date.now();

before(async () => {
  if (!RUNS) return;
  await rm(WORK, { recursive: true, force: true });
  await mkdir(WORK, { recursive: true });
  state.model = await startModelServer();
  state.site = makeSite();
  const fixture = {
    sites: [{ siteId: SITE_ID, site: state.site.identity }],
    consents: [{ owner: OWNER, siteId: SITE_ID }],
    devices: [],
  };
  // A lease of 31 s, not the default 60 s, keeps the run short when a kill
  // costs a daemon its result or its fetch: the lease lapses, relayd keeps
  // the sealed job for its holder (README D14), and the holder's next claim
  // gets it back. 31 s is past the daemon's 30 s backoff before it runs a
  // job it began again (byollm src/runner.ts ATTEMPT_BACKOFF_MS), so that
  // first re-grant runs.
  state.relay = await launchFaults({ fixture, workDir: WORK, extraArgs: ["--lease-ms", "31000"] });
}, { timeout: 180_000 });

after(async () => {
  if (!RUNS) return;
  await state.relay?.stop().catch(() => undefined);
  await stopAll();
  await state.model?.close();
  console.log(`${RELAY} faults: the whole run took ${((Date.now() - runStarted) / 1000).toFixed(1)} s of wall time`);
}, { timeout: 20_000 });

async function withLogs(step) {
  try {
    return await step();
  } catch (error) {
    const names = ["byollm-run-1", "byollm-run-2", ...(state.relay?.logs ?? [])];
    for (const name of names) {
      const text = await readFile(join(WORK, `${name}.log`), "utf8").catch(() => "(no log)");
      console.error(`--- ${name}.log (last 2000 chars) ---\n${text.slice(-2000)}`);
    }
    throw error;
  }
}

test("faults: two byollm daemons pair through the load balancer", { skip: SKIP, timeout: 60_000 }, () =>
  withLogs(async () => {
    for (const n of [1, 2]) {
      const daemon = new Daemon(join(WORK, `daemon-${n}-home`));
      await daemon.configure(state.model.baseUrl);
      const runnerId = `runner_faults_${n}_${randomBytes(3).toString("hex")}`;
      await daemon.connect(state.relay.url, {
        logDir: WORK,
        logName: `byollm-connect-${n}`,
        approve: (userCode) => state.relay.approve({ userCode, owner: OWNER, runnerId }),
      });
      state.daemons.push({ daemon, runnerId });
    }
  }),
);

// The faults, in order, one after each of the first four batches.
const FAULTS = [
  { name: "Valkey clean restart 1", inject: () => state.relay.restartValkey({ downMs: OUTAGE_MS }) },
  { name: "kill -9 replica b", inject: () => state.relay.killReplica("b") },
  { name: "Valkey clean restart 2", inject: () => state.relay.restartValkey({ downMs: OUTAGE_MS }) },
  { name: "kill -9 replica c", inject: () => state.relay.killReplica("c") },
];

test(`faults: ${JOBS} jobs through two Valkey restarts and two replica kills, none lost, no 5xx`, { skip: SKIP, timeout: 110_000 }, () =>
  withLogs(async () => {
    assert.equal(state.daemons.length, 2, "both daemons paired");
    assert.equal(JOBS % BATCHES, 0, `INTEROP_FAULT_JOBS (${JOBS}) splits into ${BATCHES} batches`);
    if (process.env.CI) assert.ok(JOBS >= 60, `CI runs at least 60 jobs through the faults, not ${JOBS}`);
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.url });
    state.runs = state.daemons.map(({ daemon }, i) => daemon.run(WORK, `byollm-run-${i + 1}`));

    const jobs = new Map(); // id -> expected text
    const completed = new Set();
    const refused = new Set();
    const terminal = new Map();
    const faultLog = [];
    const deferred = [];
    let unreachable = 0; // pumps a killed replica's reset connection ended
    let fault; // the fault being injected, a promise
    let nextFault = 0;
    let pumps = 0;
    const batch = JOBS / BATCHES;

    const enqueueBatch = async () => {
      const from = jobs.size;
      for (let n = from; n < from + batch; n += 1) {
        const { input, expected } = jobNumber(n, OWNER);
        jobs.set((await app.enqueue(input)).id, expected);
      }
    };
    const startFault = () => {
      const { name, inject } = FAULTS[nextFault];
      nextFault += 1;
      const began = Date.now();
      fault = inject().then((downMs) => {
        faultLog.push(`${name} at +${((began - runStarted) / 1000).toFixed(1)} s${downMs ? ` (Valkey down ${downMs} ms)` : ""}`);
        fault = undefined;
      });
    };

    await enqueueBatch();
    await waitFor(
      `${JOBS} results through the faults`,
      async () => {
        for (const run of state.runs) if (run.exit) throw new Error(`byollm run exited: ${JSON.stringify(run.exit)}`);
        // The next batch goes in once the last fault is over and most of
        // what was enqueued is done; its fault starts with it in flight.
        if (!fault && jobs.size < JOBS && completed.size >= jobs.size - batch / 2) {
          await enqueueBatch();
          if (nextFault < FAULTS.length) startFault();
        }
        let report;
        try {
          report = await app.cloud.pump();
        } catch (error) {
          // A connection the kill reset: fetch itself fails, no status at
          // all. Any refusal from the relay still fails the run.
          if (!(error instanceof TypeError && /fetch failed/.test(error.message))) throw error;
          unreachable += 1;
          return false;
        }
        pumps += 1;
        if (report.deferred) deferred.push(report.deferred);
        report.refused.forEach((id) => refused.add(id));
        report.completed.forEach((id) => completed.add(id));
        if (refused.size > 0) throw new Error(`the SDK refused ${[...refused].join(", ")}`);
        for (const id of jobs.keys()) {
          if (terminal.has(id)) continue;
          const result = await app.result(id);
          if (result && result.state !== "queued" && result.state !== "claimed") terminal.set(id, result);
        }
        return jobs.size === JOBS && terminal.size === JOBS && !fault;
      },
      { timeoutMs: 100_000, intervalMs: 150 },
    );
    console.log(`faults: ${faultLog.join("; ")}`);
    console.log(`faults: ${JOBS} jobs in ${pumps} pumps; ${unreachable} pumps cut by a kill; deferred ${deferred.length}: ${[...new Set(deferred)].join("; ")}`);
    assert.equal(nextFault, FAULTS.length, "every fault was injected");
    assert.equal(completed.size, JOBS, "the SDK opened and verified every result envelope");
    for (const [id, expected] of jobs) {
      const result = terminal.get(id);
      assert.equal(result.state, "ok", `job ${id}: ${JSON.stringify(result)}`);
      assert.equal(result.outcome?.text, expected, `job ${id} text`);
      assert.equal(result.provenance?.model, MODEL, `job ${id} model`);
    }
    const ranOn = {};
    for (const r of terminal.values()) ranOn[r.provenance?.runnerId] = (ranOn[r.provenance?.runnerId] ?? 0) + 1;
    for (const id of Object.keys(ranOn)) assert.ok(state.daemons.some((d) => d.runnerId === id), `job ran on one of our daemons, not ${id}`);
    console.log(`faults: jobs per daemon ${JSON.stringify(ranOn)}; balancer ${JSON.stringify(state.relay.balancer)}`);

    // Stop the daemons before counting, so no answer lands after the count.
    for (const run of state.runs) await stop(run);
    console.log(`faults: jobs a daemon claimed more than once (a lease it let lapse, given back, README D14): ${await reclaimed()}`);
    await assertNoFiveHundreds();
  }),
);

// How many jobs the daemons' logs show claimed more than once: each line
// "claimed <kind> <job id>" is one grant the daemon took.
async function reclaimed() {
  const claims = new Map();
  for (const n of [1, 2]) {
    const text = await readFile(join(WORK, `byollm-run-${n}.log`), "utf8").catch(() => "");
    for (const [, id] of text.matchAll(/ claimed llm\.\w+ ([0-9a-f-]{36})/g)) claims.set(id, (claims.get(id) ?? 0) + 1);
  }
  return [...claims.values()].filter((count) => count > 1).length;
}

// Every relayd process's answers, counted at the relay. Each process logs
// one line per answered request; a killed process's counters died with it,
// so its log is its count. A live process's /metrics must agree with its
// log, which is what makes the log an honest count.
async function assertNoFiveHundreds() {
  const fiveHundreds = [];
  let retries = 0;
  for (const process of state.relay.processes) {
    const logged = await loggedAnswers(process.logPath);
    assert.ok(logged.answered > 0, `${process.name} answered requests`);
    fiveHundreds.push(...logged.fiveHundreds.map((a) => `${process.name} ${a.status} ${a.path}`));
    if (process.killed) continue;
    const scraped = await scrapedAnswers(process.admin);
    assert.equal(scraped.answered, logged.answered, `${process.name}: /metrics counts the answers its log shows`);
    assert.equal(scraped.fiveHundreds, logged.fiveHundreds.length, `${process.name}: /metrics and its log agree on 5xx`);
    retries += scraped.storeRetries;
  }
  console.log(`faults: relayd processes ${state.relay.processes.map((p) => `${p.name}${p.killed ? " (killed)" : ""}`).join(", ")}; store retries on the live ones: ${retries}`);
  assert.deepEqual(fiveHundreds, [], "no relayd process answered a 5xx");
  assert.ok(retries > 0, "the Valkey outages were felt: the store retried calls through them");
}
