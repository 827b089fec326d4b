// The grants suite (spec grants.md G-R58, T1): relayd as its own grant
// author, driven by the published 0.1.1 clients. Two byollm daemons of two
// owners, alice and bob, each with a model server of its own, so that the
// server that saw a prompt names the daemon that ran it. Bob's roster
// lists alice; alice's default generate work is mapped to bob's `echo`,
// offered to his team. relayd holds the grant key; `relayd approve`
// enrols both devices with it.
//
// INTEROP_RELAY=relayd | relayd-valkey-3 | control. The control is the
// published relay 0.1.1 wired to the published @byollm/control-plane 0.1.1
// (launchers/control-grants.mjs) with the same facts and the same key. Where
// relayd differs from it on purpose (DG2's per-device enrolment, G-R8's
// owner's default, D4 for a device that is not enrolled), a step says which
// relay it asserts what of.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, rm, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { launcherNamed } from "../launchers/index.mjs";
import { grantKey, teamFixture } from "../lib/grants.mjs";
import { startModelServer, answerFor } from "../lib/model-server.mjs";
import { Daemon } from "../lib/daemon.mjs";
import { makeSite, siteApp } from "../lib/site.mjs";
import { stop, stopAll, waitFor, withLogsFrom } from "../lib/proc.mjs";
import { metricSum } from "../lib/relayd.mjs";

const RELAY = process.env.INTEROP_RELAY ?? "relayd";
const CONTROL = RELAY === "control";
const SITE_ID = "site_interop";
const tag = randomBytes(4).toString("hex");
const OWNERS = { alice: `runner_alice_${tag}`, bob: `runner_bob_${tag}` };
const WORK = fileURLToPath(new URL(`../.run/grants-${RELAY}/`, import.meta.url));

const state = { models: {}, daemons: {}, runs: {} };

before(async () => {
  await rm(WORK, { recursive: true, force: true });
  await mkdir(WORK, { recursive: true });
  state.site = makeSite();
  state.key = await grantKey(WORK);
  const fixture = teamFixture(SITE_ID, state.site.identity);
  state.relay = await launcherNamed(RELAY)({ fixture, workDir: WORK, extraArgs: ["--grant-key-file", state.key.path] });
  for (const owner of Object.keys(OWNERS)) {
    state.models[owner] = await startModelServer();
    state.daemons[owner] = new Daemon(join(WORK, `${owner}-home`));
    await state.daemons[owner].configure(state.models[owner].baseUrl, { service: "echo", offer: "team" });
  }
}, { timeout: 180_000 });

after(async () => {
  await state.relay?.stop().catch(() => undefined);
  await stopAll();
  for (const model of Object.values(state.models)) await model.close();
}, { timeout: 20_000 });

// Print a child's log tail when a step fails, so CI output says why.
const withLogs = withLogsFrom(WORK);

test(CONTROL
  ? "control: the operator approves both daemons, which pin the control plane's one key (DG2)"
  : `${RELAY}: relayd approve enrols both daemons, which pin relayd's grant key`, { timeout: 90_000 }, () =>
  withLogs(async () => {
    for (const [owner, runnerId] of Object.entries(OWNERS)) {
      await state.daemons[owner].connect(state.relay.daemonUrl, {
        logDir: WORK,
        name: `${owner}-connect`,
        approve: (userCode) => state.relay.approve({ userCode, owner, runnerId }),
      });
      const stored = await state.daemons[owner].pairings();
      const pairing = stored.pairings?.find((p) => p.origin === state.relay.daemonUrl);
      assert.ok(pairing, `${owner}'s pairings.json has the relay: ${JSON.stringify(stored)}`);
      assert.equal(pairing.runnerId, runnerId);
      assert.equal(pairing.controlPlanePublic, state.key.public, `${owner}'s daemon pinned relayd's grant key`);
    }
    const fixture = await readPolicy();
    assert.deepEqual(fixture.devices.map((d) => d.runnerId), Object.values(OWNERS), "both devices are approved");
    // relayd enrols a device by its record (DG2); the reference has one key
    // for every device it pairs, so its records name none.
    const enrolled = CONTROL ? [undefined, undefined] : [state.key.public, state.key.public];
    assert.deepEqual(fixture.devices.map((d) => d.grantKey), enrolled, "the records' grant keys");
    state.paired = true;
  }, ["alice-connect", "bob-connect", "relayd-approve", ...(state.relay?.logs ?? [])]),
);

test(`${RELAY}: T1, alice's team job runs on bob's daemon under a grant it verified`, { timeout: 120_000 }, () =>
  withLogs(async () => {
    assert.ok(state.paired, "the pairing step must pass first");
    for (const owner of Object.keys(OWNERS)) state.runs[owner] = state.daemons[owner].run(WORK, `${owner}-run`);
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.siteUrl });
    const prompt = `grants interop: alice asks bob's echo (${tag})`;
    const handle = await app.enqueue({ kind: "llm.generate", owner: "alice", payload: { prompt } });
    const refused = new Set();
    let result;
    await waitFor(
      "alice's job to finish",
      async () => {
        for (const [owner, run] of Object.entries(state.runs)) {
          if (run.exit) throw new Error(`${owner}'s byollm run exited: ${JSON.stringify(run.exit)}`);
        }
        const report = await app.cloud.pump();
        report.refused.forEach((id) => refused.add(id));
        if (refused.size > 0) throw new Error(`the SDK refused ${[...refused].join(", ")}`);
        result = await app.result(handle.id);
        return result && result.state !== "queued" && result.state !== "claimed";
      },
      // A first claim by alice's own device is declined (the mapping names
      // bob's service) and bars it for 30 s; bob's device takes it at once.
      { timeoutMs: 100_000, intervalMs: 150 },
    );
    assert.equal(result.state, "ok", JSON.stringify(result));
    assert.equal(result.outcome.text, answerFor(prompt));
    assert.equal(result.provenance?.runnerId, OWNERS.bob, "it ran on bob's daemon");
    assert.equal(result.provenance?.runnerOwner, "bob");
    assert.ok(JSON.stringify(state.models.bob.calls).includes(prompt), "bob's model server got the prompt");
    assert.ok(!JSON.stringify(state.models.alice.calls).includes(prompt), "alice's model server got nothing of it");
    const status = await state.daemons.bob.status(WORK, "bob-status");
    assert.ok(status.includes(`whoever ${state.relay.daemonUrl} admits`), `bob's byollm status: ${status}`);
  }, ["alice-run", "bob-run", ...(state.relay?.logs ?? [])]),
);

// The sum over every replica of the metric series that start as `prefix`.
const metric = (prefix) => metricSum(state.relay.admins, prefix);

// Pump the site until `done` says so, failing on any refusal or a daemon
// that exited.
async function pumpUntil(app, what, done, timeoutMs) {
  await waitFor(
    what,
    async () => {
      for (const [owner, run] of Object.entries(state.runs)) {
        if (run.exit && !run.stopped) throw new Error(`${owner}'s byollm run exited: ${JSON.stringify(run.exit)}`);
      }
      const report = await app.cloud.pump();
      if (report.refused.length > 0) throw new Error(`the SDK refused ${report.refused.join(", ")}`);
      return done();
    },
    { timeoutMs, intervalMs: 150 },
  );
}

// The policy in force: relayd's fixture file, or what the control's
// operator side holds (the same shape; the launcher translates it).
async function readPolicy() {
  if (CONTROL) return state.relay.readFixture();
  return JSON.parse(await readFile(join(WORK, "fixture.json"), "utf8"));
}

// Edit the policy as an operator does. relayd: the fixture every replica
// reads, written beside it and renamed over it. The control: the projection
// and the policy store replaced at once.
async function editFixture(edit) {
  const fixture = await readPolicy();
  edit(fixture);
  if (CONTROL) return state.relay.writeFixture(fixture);
  const path = join(WORK, "fixture.json");
  await writeFile(`${path}.tmp`, `${JSON.stringify(fixture, null, 2)}\n`);
  await rename(`${path}.tmp`, path);
}

// Claims answered 200, on every replica. relayd counts them in /metrics; the
// control's host counts them.
async function claimsServed() {
  if (CONTROL) return state.relay.claims();
  return metric('relayd_http_requests_total{route="claim",status="200"}');
}

// Grant decisions (granted or declined) so far, those with `reason` if given.
// relayd: relayd_signed_grants_total; the control: its engine's decision log.
async function decisions(reason) {
  if (CONTROL) return (await state.relay.decisions()).filter((d) => reason === undefined || d.reason === reason).length;
  if (reason === undefined) return metric("relayd_signed_grants_total{");
  return metric(`relayd_signed_grants_total{outcome="declined",permanent="false",reason="${reason}"}`);
}

test(`${RELAY}: T3, a job of someone on no roster of bob's is never offered to bob's daemon`, { timeout: 60_000 }, () =>
  withLogs(async () => {
    assert.ok(state.paired, "the pairing step must pass first");
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.siteUrl });
    await editFixture((f) => f.consents.push({ owner: "carol", siteId: SITE_ID }));
    const carolsJob = await app.enqueue({ kind: "llm.generate", owner: "carol", payload: { prompt: `carol's own (${tag})` } });
    const claimsBefore = await claimsServed();
    const decidedBefore = await decisions();
    await pumpUntil(app, "three more claims", async () => (await claimsServed()) >= claimsBefore + 3 * Object.keys(OWNERS).length, 50_000);
    assert.equal((await app.result(carolsJob.id))?.state, "queued", "nobody ran carol's job");
    assert.equal(await decisions(), decidedBefore, "it was never offered, so never declined");
    assert.ok(!JSON.stringify(state.models.bob.calls).includes("carol's own"));
    await app.cancel(carolsJob.id);
  }, ["alice-run", "bob-run", ...(state.relay?.logs ?? [])]),
);

test(`${RELAY}: T2, a job without a mapping is declined transiently, and runs once its mapping is added`, { timeout: 150_000 }, () =>
  withLogs(async () => {
    assert.ok(state.paired, "the pairing step must pass first");
    // On relayd alice's own daemon would take her unmapped chat job by the
    // owner's default (G-R8, a difference); on the control it would be
    // declined unmapped too. Only bob's daemon runs here, on both.
    state.runs.alice.stopped = true;
    await stop(state.runs.alice);
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.siteUrl });
    const text = `grants interop: alice's chat, unmapped at first (${tag})`;
    const before = await decisions("unmapped");
    const handle = await app.enqueue({ kind: "llm.chat", owner: "alice", payload: { messages: [{ role: "user", content: text }] } });
    await pumpUntil(app, "bob's daemon to be declined unmapped", async () => (await decisions("unmapped")) > before, 60_000);
    assert.equal((await app.result(handle.id))?.state, "queued", "declined, back in the queue");
    assert.ok(!JSON.stringify(state.models.bob.calls).includes(text), "nothing ran");

    await editFixture((f) => f.consents[0].mappings.push({ purpose: "default", kind: "llm.chat", service: "echo", serviceOwner: "bob" }));
    let result;
    await pumpUntil(app, "the job to run once mapped", async () => {
      result = await app.result(handle.id);
      return result && result.state !== "queued" && result.state !== "claimed";
    }, 90_000);
    assert.equal(result.state, "ok", JSON.stringify(result));
    assert.equal(result.provenance?.runnerId, OWNERS.bob);
    assert.equal(result.outcome.text, answerFor(`User: ${text}`));
  }, ["bob-run", ...(state.relay?.logs ?? [])]),
);

test(CONTROL
  ? "control: T4's device pins the one key (DG2); its owner's job runs, a roster member's is declined resolved-elsewhere on it (D4)"
  : `${RELAY}: T4, a device approved without a grant key is unchanged: no key, its owner's work only, no grant`, { timeout: 120_000 }, () =>
  withLogs(async () => {
    assert.ok(state.paired, "the pairing step must pass first");
    const runnerId = `runner_dave_${tag}`;
    // Dave's roster lists alice, which would widen his routes were he
    // enrolled (D4 holds for him on relayd). His own mapping is what the
    // control's engine needs to grant his own job (it has no owner's
    // default, G-R8); relayd, not enrolling him, never reads it.
    await editFixture((f) => {
      f.consents.push({ owner: "dave", siteId: SITE_ID, mappings: [{ purpose: "default", kind: "llm.generate", service: "echo" }] });
      f.rosters.push({ id: "team_dave", owner: "dave", members: ["alice"] });
    });
    state.models.dave = await startModelServer();
    const dave = new Daemon(join(WORK, "dave-home"));
    await dave.configure(state.models.dave.baseUrl, { service: "echo", offer: "team" });
    await dave.connect(state.relay.daemonUrl, {
      logDir: WORK,
      name: "dave-connect",
      approve: (userCode) => state.relay.approve({ userCode, owner: "dave", runnerId, grantKey: "none" }),
    });
    const pairing = (await dave.pairings()).pairings?.find((p) => p.origin === state.relay.daemonUrl);
    assert.equal(pairing?.runnerId, runnerId);
    const status = await dave.status(WORK, "dave-status");
    if (CONTROL) {
      // The difference DG2 names: the reference hands its one key to every
      // device it pairs, so no device of a relay with an author is unenrolled.
      assert.equal(pairing.controlPlanePublic, state.key.public, "the control pins its one key on every device");
      assert.ok(status.includes(`whoever ${state.relay.daemonUrl} admits`), `dave's byollm status: ${status}`);
    } else {
      assert.equal(pairing.controlPlanePublic, undefined, "no key is pinned");
      assert.ok(status.includes(`nobody else, through ${state.relay.daemonUrl}`), `dave's byollm status: ${status}`);
    }

    // Only dave's daemon runs now: alice's was stopped for T2, bob's goes.
    state.runs.bob.stopped = true;
    await stop(state.runs.bob);
    state.runs.dave = dave.run(WORK, "dave-run");
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.siteUrl });
    const alicesText = `grants interop: alice's team job, never for dave (${tag})`;
    const alices = await app.enqueue({ kind: "llm.generate", owner: "alice", payload: { prompt: alicesText } });
    const davesText = `grants interop: dave's own (${tag})`;
    const daves = await app.enqueue({ kind: "llm.generate", owner: "dave", payload: { prompt: davesText } });
    let result;
    let claimsAtDone;
    await pumpUntil(app, "dave's own job to run", async () => {
      result = await app.result(daves.id);
      claimsAtDone = await claimsServed();
      return result && result.state !== "queued" && result.state !== "claimed";
    }, 60_000);
    assert.equal(result.state, "ok", JSON.stringify(result));
    assert.equal(result.provenance?.runnerId, runnerId, "dave's own work runs on dave's device");
    assert.ok(JSON.stringify(state.models.dave.calls).includes(davesText));
    await pumpUntil(app, "three more of dave's claims", async () => (await claimsServed()) >= claimsAtDone + 3, 50_000);
    assert.equal((await app.result(alices.id))?.state, "queued", CONTROL ? "alice's team job never runs on dave's device" : "alice's team job is never offered to dave's device");
    assert.ok(!JSON.stringify(state.models.dave.calls).includes(alicesText));
    if (CONTROL) {
      // The reference routes dave's roster to his device, and its engine
      // declines alice's job there, transiently: her mapping names bob's echo.
      const onDave = (await state.relay.decisions()).filter((d) => d.runnerId === runnerId && d.user === "alice");
      assert.ok(onDave.length > 0 && onDave.every((d) => !d.granted && d.reason === "resolved-elsewhere" && !d.permanent), JSON.stringify(onDave));
    }
  }, ["dave-connect", "dave-run", ...(state.relay?.logs ?? [])]),
);
