// The grants suite's T3 (b) (spec grants.md G-R58): a permanent decline is
// permanent. The relay's fixture routes alice's job to bob's device (bob's
// roster lists alice), but the grant author's policy store has no such
// membership, so bob is declined `not-a-member` on his first claim. The
// membership is then added to the store, and bob's daemon must still never
// receive the job before its deadline, set short (60 s).
//
// The author is the published @byollm/control-plane 0.1.1 engine on both
// relays: on the control, wired into the published relay 0.1.1
// (control-grants.mjs); on relayd, relayd's external author
// (--grant-author-url), the engine served over HTTP by the shim of G-R36
// (launchers/author-host.mjs), with a bearer token.
//
// INTEROP_RELAY=relayd | relayd-valkey-3 | control.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, rm, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { launcherNamed } from "../launchers/index.mjs";
import { grantKey, teamFixture } from "../lib/grants.mjs";
import { startAuthor } from "../launchers/author.mjs";
import { startModelServer } from "../lib/model-server.mjs";
import { Daemon } from "../lib/daemon.mjs";
import { makeSite, siteApp } from "../lib/site.mjs";
import { stopAll, waitFor, withLogsFrom } from "../lib/proc.mjs";
import { metricSum } from "../lib/relayd.mjs";

const RELAY = process.env.INTEROP_RELAY ?? "relayd";
const CONTROL = RELAY === "control";
const SITE_ID = "site_interop";
const tag = randomBytes(4).toString("hex");
const BOB = `runner_bob_${tag}`;
const TTL_MS = 60_000;
const WORK = fileURLToPath(new URL(`../.run/grants-permanence-${RELAY}/`, import.meta.url));

const state = {};

before(async () => {
  await rm(WORK, { recursive: true, force: true });
  await mkdir(WORK, { recursive: true });
  state.site = makeSite();
  state.key = await grantKey(WORK);
  state.fixture = teamFixture(SITE_ID, state.site.identity);
  // The author's store knows the consents and mappings, not the membership.
  const noMembership = { ...state.fixture, rosters: [] };
  if (CONTROL) {
    state.relay = await launcherNamed(RELAY)({ fixture: state.fixture, workDir: WORK, extraArgs: ["--grant-key-file", state.key.path] });
    state.author = { writePolicy: state.relay.writePolicy, decisions: state.relay.decisions, logs: [] };
  } else {
    const tokenPath = join(WORK, "author-token");
    await writeFile(tokenPath, `${randomBytes(16).toString("hex")}\n`, { mode: 0o400 });
    state.author = await startAuthor({ policy: noMembership, keyPath: state.key.path, tokenPath, workDir: WORK });
    state.relay = await launcherNamed(RELAY)({
      fixture: state.fixture,
      workDir: WORK,
      extraArgs: ["--grant-author-url", state.author.url, "--grant-author-key", state.key.public, "--grant-author-token-file", tokenPath],
    });
  }
  await state.author.writePolicy(noMembership);
  state.model = await startModelServer();
  state.bob = new Daemon(join(WORK, "bob-home"));
  await state.bob.configure(state.model.baseUrl, { service: "echo", offer: "team" });
}, { timeout: 180_000 });

after(async () => {
  await state.relay?.stop().catch(() => undefined);
  await state.author?.stop?.().catch(() => undefined);
  await stopAll();
  await state.model?.close();
}, { timeout: 20_000 });

const logNames = () => [...(state.relay?.logs ?? []), ...(state.author?.logs ?? [])];

// Print a child's log tail when a step fails, so CI output says why.
const withLogs = withLogsFrom(WORK);

// The sum over every replica of the metric series that start as `prefix`.
const metric = (prefix) => metricSum(state.relay.admins, prefix);

async function claimsServed() {
  if (CONTROL) return state.relay.claims();
  return metric('relayd_http_requests_total{route="claim",status="200"}');
}

const onBob = async (jobId) => (await state.author.decisions()).filter((d) => d.runnerId === BOB && d.jobId === jobId);

test(CONTROL
  ? "control: bob's daemon pins the control plane's key"
  : `${RELAY}: relayd approve enrols bob's daemon with the external author's key, which it pins`, { timeout: 90_000 }, () =>
  withLogs(async () => {
    await state.bob.connect(state.relay.daemonUrl, {
      logDir: WORK,
      name: "bob-connect",
      approve: (userCode) => state.relay.approve({ userCode, owner: "bob", runnerId: BOB }),
    });
    const pairing = (await state.bob.pairings()).pairings?.find((p) => p.origin === state.relay.daemonUrl);
    assert.equal(pairing?.runnerId, BOB);
    assert.equal(pairing.controlPlanePublic, state.key.public, "bob's daemon pinned the author's key");
    if (!CONTROL) {
      const fixture = JSON.parse(await readFile(join(WORK, "fixture.json"), "utf8"));
      assert.deepEqual(fixture.devices.map((d) => d.grantKey), [state.key.public], "approve wrote the author's key (G-R35)");
      for (const admin of state.relay.admins) {
        const keys = await (await fetch(`${admin}/grant-keys`)).json();
        assert.equal(keys.current?.signer, "external", JSON.stringify(keys));
      }
    }
    state.paired = true;
  }, ["bob-connect", "relayd-approve", ...logNames()]),
);

test(`${RELAY}: T3 (b), a not-a-member decline stands after the membership is added, until the job's deadline`, { timeout: 150_000 }, () =>
  withLogs(async () => {
    assert.ok(state.paired, "the pairing step must pass first");
    state.run = state.bob.run(WORK, "bob-run");
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.siteUrl });
    const prompt = `grants interop: alice's job, bob not a member in the store (${tag})`;
    const enqueuedAt = Date.now();
    const handle = await app.enqueue({ kind: "llm.generate", owner: "alice", payload: { prompt }, ttlMs: TTL_MS });
    const pump = async () => {
      if (state.run.exit) throw new Error(`bob's byollm run exited: ${JSON.stringify(state.run.exit)}`);
      const report = await app.cloud.pump();
      if (report.refused.length > 0) throw new Error(`the SDK refused ${report.refused.join(", ")}`);
    };
    await waitFor("bob's first claim to be declined not-a-member", async () => {
      await pump();
      return (await onBob(handle.id)).length > 0;
    }, { timeoutMs: 40_000, intervalMs: 150 });
    assert.deepEqual((await onBob(handle.id)).map(({ granted, reason, permanent }) => ({ granted, reason, permanent })),
      [{ granted: false, reason: "not-a-member", permanent: true }], "declined on his first claim, permanently");

    await state.author.writePolicy(state.fixture);
    const claimsAtMember = await claimsServed();
    await waitFor("the job's deadline to pass", async () => {
      await pump();
      assert.ok(!JSON.stringify(state.model.calls).includes(prompt), "bob's model server never got the prompt");
      const result = await app.result(handle.id);
      assert.notEqual(result?.state, "ok", JSON.stringify(result));
      return Date.now() > enqueuedAt + TTL_MS + 5_000;
    }, { timeoutMs: TTL_MS + 30_000, intervalMs: 250 });

    assert.ok((await claimsServed()) >= claimsAtMember + 3, "bob kept claiming after the membership was added");
    assert.equal((await onBob(handle.id)).length, 1, "the author was never asked about it for bob again");
    assert.ok(!JSON.stringify(state.model.calls).includes(prompt), "bob's model server never got the prompt");
    if (!CONTROL) {
      assert.equal(await metric('relayd_signed_grants_total{outcome="declined",permanent="true",reason="not-a-member"}'), 1);
      assert.equal(await metric('relayd_signed_grants_total{outcome="granted"'), 0, "nothing was granted");
      assert.ok((await metric('relayd_grant_author_duration_seconds_count{mode="external"}')) >= 1);
    }
  }, ["bob-run", ...logNames()]),
);

test(`${RELAY}: with the membership in the author's store, a new job of alice's runs on bob's daemon under the author's grant`, { timeout: 90_000 }, () =>
  withLogs(async () => {
    assert.ok(state.run, "T3 (b) must run first");
    const app = siteApp({ keys: state.site.keys, siteId: SITE_ID, relayUrl: state.relay.siteUrl });
    const prompt = `grants interop: alice's job, bob now a member (${tag})`;
    const handle = await app.enqueue({ kind: "llm.generate", owner: "alice", payload: { prompt } });
    let result;
    await waitFor("alice's job to finish on bob", async () => {
      if (state.run.exit) throw new Error(`bob's byollm run exited: ${JSON.stringify(state.run.exit)}`);
      const report = await app.cloud.pump();
      if (report.refused.length > 0) throw new Error(`the SDK refused ${report.refused.join(", ")}`);
      result = await app.result(handle.id);
      return result && result.state !== "queued" && result.state !== "claimed";
    }, { timeoutMs: 60_000, intervalMs: 150 });
    assert.equal(result.state, "ok", JSON.stringify(result));
    assert.equal(result.provenance?.runnerId, BOB, "it ran on bob's daemon, which verified the author's grant");
    assert.ok(JSON.stringify(state.model.calls).includes(prompt));
    assert.deepEqual((await onBob(handle.id)).map((d) => d.granted), [true], "the author granted it once");
    if (!CONTROL) assert.equal(await metric('relayd_signed_grants_total{outcome="granted"'), 1);
  }, ["bob-run", ...logNames()]),
);
