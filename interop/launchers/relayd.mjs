// The relayd launchers. Each returns the shape control.mjs returns:
//   { name, daemonUrl, siteUrl, auditUrls, logs,
//     approve({userCode, owner, runnerId}) -> {device},
//     pendingOn(userCode) -> names of the listeners still showing the code,
//     stop() }
//
// - `relayd`: one relayd on the memory store.
// - `relayd-valkey-3`: one Valkey and three replicas sharing one key prefix.
//   The site talks to replica A, the daemon to replica B, and the approval
//   and the audit go through replica C. So the pending code the daemon's
//   `start` put in the store on B must be found from C, the approval C's
//   operator writes must reach B's poll, and jobs the site enqueues on A must
//   be claimed, sealed and answered across replicas.
//
// Approval is relayd's own operator command in both (decision D3), never a
// shortcut: lib/relayd.mjs approveWithCommand.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { relaydBinary, writeFixture, startRelayd, approveWithCommand, isPending } from "../lib/relayd.mjs";
import { startValkey } from "../lib/valkey.mjs";
import { startTraceProxy } from "../lib/trace.mjs";
import { startBalancer } from "../lib/balancer.mjs";

// The URL the clients use for a replica: its public listener, or with
// INTEROP_TRACE=1 a logging proxy in front of it (<workDir>/<name>-trace.log).
// The audit always goes to the listener itself.
async function clientUrl(relay, name, workDir, stoppers) {
  if (process.env.INTEROP_TRACE !== "1") return relay.public;
  const proxy = await startTraceProxy(relay.public, join(workDir, `${name}-trace.log`));
  stoppers.push(proxy.close);
  return proxy.url;
}

// Stop what was started, last first, whatever fails along the way.
async function stopAll(stoppers) {
  for (const stopOne of [...stoppers].reverse()) await stopOne().catch(() => undefined);
}

// Run `body` with a list to push stoppers on; if it throws, stop them before
// rethrowing, so a half-started launcher leaves nothing running.
async function startedOrStopped(body) {
  const stoppers = [];
  try {
    return await body(stoppers);
  } catch (error) {
    await stopAll(stoppers);
    throw error;
  }
}

// `extraArgs` are more relayd flags for every replica (the grants suite's
// --grant-key-file).
export function launch({ fixture, workDir, extraArgs = [] }) {
  return startedOrStopped(async (stoppers) => {
    const binary = await relaydBinary(workDir);
    const fixturePath = await writeFixture(workDir, fixture);
    const relay = await startRelayd({ name: "relayd", binary, fixturePath, workDir, extraArgs: ["--store", "memory", ...extraArgs] });
    stoppers.push(relay.stop);
    const url = await clientUrl(relay, "relayd", workDir, stoppers);
    return {
      name: "relayd",
      daemonUrl: url,
      siteUrl: url,
      auditUrls: [relay.public],
      // Every admin listener, for a suite that reads /metrics.
      admins: [relay.admin],
      logs: ["relayd", "relayd-approve"],
      approve: ({ userCode, owner, runnerId, grantKey }) =>
        approveWithCommand({ binary, admin: relay.admin, fixturePath, workDir, userCode, owner, runnerId, grantKey }),
      pendingOn: async (userCode) => ((await isPending(relay.admin, userCode)) ? ["relayd"] : []),
      stop: () => stopAll(stoppers),
    };
  });
}

export function launchValkey3({ fixture, workDir, extraArgs = [] }) {
  return startedOrStopped(async (stoppers) => {
    const binary = await relaydBinary(workDir);
    const fixturePath = await writeFixture(workDir, fixture);
    const valkey = await startValkey(workDir);
    stoppers.push(valkey.stop);
    // One prefix for the three, fresh per run: they share every key.
    const prefix = `relayd-interop:{${randomBytes(4).toString("hex")}}:`;
    const storeArgs = ["--store", "valkey", "--valkey-addr", valkey.addr, "--valkey-prefix", prefix, ...extraArgs];
    const replicas = {};
    for (const letter of ["a", "b", "c"]) {
      const replica = await startRelayd({ name: `relayd-${letter}`, binary, fixturePath, workDir, extraArgs: storeArgs });
      stoppers.push(replica.stop);
      replicas[letter] = replica;
    }
    const { a, b, c } = replicas;
    return {
      name: "relayd-valkey-3",
      siteUrl: await clientUrl(a, "relayd-a", workDir, stoppers),
      daemonUrl: await clientUrl(b, "relayd-b", workDir, stoppers),
      // C first, the audit's replica; A and B too, since each replica is a
      // deployment's public face behind a load balancer.
      auditUrls: [c.public, a.public, b.public],
      admins: [a.admin, b.admin, c.admin],
      logs: ["relayd-a", "relayd-b", "relayd-c", "relayd-approve", "valkey"],
      approve: ({ userCode, owner, runnerId, grantKey }) =>
        approveWithCommand({ binary, admin: c.admin, fixturePath, workDir, userCode, owner, runnerId, grantKey }),
      // Every replica answers from the one store: once B's poll spent the
      // code, none of them may still show it.
      pendingOn: async (userCode) => {
        const shown = [];
        for (const [letter, replica] of Object.entries(replicas)) {
          if (await isPending(replica.admin, userCode)) shown.push(`relayd-${letter}`);
        }
        return shown;
      },
      stop: () => stopAll(stoppers),
    };
  });
}

/**
 * The faults run's deployment (test/faults.test.mjs): three replicas on one
 * Valkey that keeps an AOF, behind one round-robin load balancer
 * (lib/balancer.mjs) that every client uses, the daemons and the site alike.
 * Returns {url, approve, processes, restartValkey({downMs}), killReplica(letter), stop}.
 *
 * `processes` lists every relayd process the run started, the killed ones
 * too, each {name, admin, logPath, killed}: a killed replica's counters die
 * with it, so the run counts its answers from the log it wrote.
 */
export function launchFaults({ fixture, workDir, extraArgs = [] }) {
  return startedOrStopped(async (stoppers) => {
    const binary = await relaydBinary(workDir);
    const fixturePath = await writeFixture(workDir, fixture);
    const valkey = await startValkey(workDir, "valkey", { persist: true });
    stoppers.push(valkey.stop);
    const prefix = `relayd-interop:{${randomBytes(4).toString("hex")}}:`;
    const storeArgs = ["--store", "valkey", "--valkey-addr", valkey.addr, "--valkey-prefix", prefix, ...extraArgs];
    const letters = ["a", "b", "c"];
    const live = {};
    const processes = [];
    const startReplica = async (name) => {
      const replica = await startRelayd({ name, binary, fixturePath, workDir, extraArgs: storeArgs });
      stoppers.push(replica.stop);
      processes.push({ name, admin: replica.admin, logPath: join(workDir, `${name}.log`), killed: false });
      return replica;
    };
    for (const letter of letters) live[letter] = await startReplica(`relayd-${letter}`);
    const balancer = await startBalancer(letters.map((letter) => live[letter].public));
    stoppers.push(balancer.close);
    let generation = 1;
    return {
      url: balancer.url,
      balancer: balancer.stats,
      processes,
      logs: [...processes.map((p) => p.name), "relayd-approve", "valkey"],
      approve: ({ userCode, owner, runnerId }) =>
        approveWithCommand({ binary, admin: live.c.admin, fixturePath, workDir, userCode, owner, runnerId }),
      restartValkey: (options) => valkey.restart(options),
      // kill -9 the replica's process group (no drain, no goodbye), then a
      // fresh process on new ports takes its place behind the balancer.
      killReplica: async (letter) => {
        const victim = live[letter];
        process.kill(-victim.proc.child.pid, "SIGKILL");
        await victim.proc.exited;
        processes.find((p) => p.admin === victim.admin).killed = true;
        generation += 1;
        live[letter] = await startReplica(`relayd-${letter}${generation}`);
        balancer.replace(letters.indexOf(letter), live[letter].public);
      },
      stop: () => stopAll(stoppers),
    };
  });
}
