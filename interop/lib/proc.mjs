// Child processes and bounded waits: every wait here polls a condition with
// a deadline, and every child started here is tracked so `stopAll` can end
// it, by its own process group id, however the test exits.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

const children = new Set();

/**
 * Poll `check` until it returns a truthy value or `timeoutMs` runs out. An
 * error thrown by `check` fails the wait at once: a condition that can never
 * become true must not be waited out.
 */
export async function waitFor(what, check, { timeoutMs, intervalMs = 100 }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Start a child in its own process group, keep its output in memory (for
 * waits that read it) and in `logPath` (for a person reading a failure).
 */
export function start(name, command, args, { env, cwd, logPath } = {}) {
  const child = spawn(command, args, {
    env,
    cwd,
    detached: true, // own group: stopping it also stops anything it spawned
    stdio: ["pipe", "pipe", "pipe"],
  });
  const log = logPath ? createWriteStream(logPath) : undefined;
  const proc = { name, child, out: "", err: "", exit: undefined };
  child.stdout.on("data", (chunk) => {
    proc.out += chunk;
    log?.write(chunk);
  });
  child.stderr.on("data", (chunk) => {
    proc.err += chunk;
    log?.write(chunk);
  });
  proc.exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      proc.exit = { code, signal };
      children.delete(proc);
      log?.end();
      resolve(proc.exit);
    });
  });
  child.on("error", (error) => {
    proc.err += `spawn failed: ${error.message}\n`;
  });
  children.add(proc);
  return proc;
}

/** SIGTERM the child's group, then SIGKILL if it has not gone in time. */
export async function stop(proc, graceMs = 5000) {
  if (proc.exit) return proc.exit;
  const signalGroup = (signal) => {
    try {
      process.kill(-proc.child.pid, signal);
    } catch {
      // Already gone.
    }
  };
  signalGroup("SIGTERM");
  const done = await Promise.race([
    proc.exited,
    new Promise((resolve) => setTimeout(() => resolve(undefined), graceMs)),
  ]);
  if (done) return done;
  signalGroup("SIGKILL");
  return proc.exited;
}

/** End every child this process started and that is still running. */
export async function stopAll() {
  await Promise.all([...children].map((proc) => stop(proc)));
}

/** Bounded wait for a child to exit by itself. */
export async function exitOf(proc, timeoutMs) {
  await waitFor(`${proc.name} to exit`, () => proc.exit, { timeoutMs });
  return proc.exit;
}

// Last resort if the driver exits without reaching its teardown (an uncaught
// error, `timeout` in the Makefile): nothing started here may outlive it.
function killAllNow() {
  for (const proc of children) {
    try {
      process.kill(-proc.child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}
process.on("exit", killAllNow);
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    killAllNow();
    process.exit(1);
  });
}

/**
 * withLogsFrom(dir) is withLogs for the child logs in dir: it runs step,
 * and when it throws, prints the tail of each named `<name>.log` there
 * before throwing again, so that CI output says why a step failed.
 */
export function withLogsFrom(dir) {
  return async function withLogs(step, names) {
    try {
      return await step();
    } catch (error) {
      for (const name of names) {
        const text = await readFile(join(dir, `${name}.log`), "utf8").catch(() => "(no log)");
        console.error(`--- ${name}.log (last 3000 chars) ---\n${text.slice(-3000)}`);
      }
      throw error;
    }
  };
}
