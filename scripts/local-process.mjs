// What scripts/kafka.mjs, scripts/jaeger.mjs and scripts/prometheus.mjs share: reading their
// environment knobs, and handling a service process that this repository started, by its own pid only. Plain Node ESM, no dependencies.
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/** A positive integer from the environment, or `fallback` when unset; anything else goes to `fail(message)`, which throws. */
export function positiveIntEnv(name, fallback, fail) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) fail(`${name}=${raw} is not a positive integer`);
  return n;
}

/** Whether the pid runs (a zombie that only waits to be reaped counts as gone). */
export function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return err.code === "EPERM";
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return true; // no /proc: trust kill(pid, 0)
  }
}

/**
 * SIGTERM this pid only, wait up to `graceMs`, then SIGKILL this pid only.
 * Resolves "not running", "stopped" or "killed"; `fail(message)` builds the error if it survives.
 */
export async function stopPid(pid, { graceMs, pollMs = 100, say, fail }) {
  if (!isAlive(pid)) return "not running";
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return "not running";
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return "stopped";
    await sleep(pollMs);
  }
  say(`pid ${pid} still running ${graceMs / 1000} s after SIGTERM; sending SIGKILL`);
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    return "stopped";
  }
  for (let i = 0; i < 100 && isAlive(pid); i++) await sleep(100);
  if (isAlive(pid)) throw fail(`pid ${pid} survived SIGKILL`);
  return "killed";
}

/**
 * Stops the service with this process: on SIGINT/SIGTERM/SIGHUP by `stop()` (then the signal's usual
 * effect), on exit by a bare SIGTERM (nothing can be awaited in 'exit'). Returns the untie function.
 */
export function tieToThisProcess(pid, stop, { say, what }) {
  const signals = ["SIGINT", "SIGTERM", "SIGHUP"];
  const onSignal = (signal) => {
    say(`${signal}: stopping ${what} pid ${pid}`);
    stop().finally(() => process.kill(process.pid, signal));
  };
  const onExit = () => {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  };
  for (const s of signals) process.once(s, onSignal);
  process.once("exit", onExit);
  return () => {
    for (const s of signals) process.removeListener(s, onSignal);
    process.removeListener("exit", onExit);
  };
}

export function safeMtime(p) {
  try {
    return statSync(p).mtimeMs;
  } catch {
    return Date.now();
  }
}

export function indent(text) {
  return text
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");
}

/**
 * Runs `fn` holding a cross-process lock: the directory `dir` (mkdir is atomic) with the owner's pid
 * inside. A lock whose owner is dead, or that has had no owner for 5 s, is taken over. After
 * `maxWaitMs` the wait fails with `fail(message)`.
 */
export async function withDirLock(dir, { maxWaitMs, pollMs, fail, describe = (p) => p }, fn) {
  mkdirSync(dirname(dir), { recursive: true });
  const deadline = Date.now() + maxWaitMs;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, "owner"), String(process.pid));
      break;
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
      let owner = NaN;
      try {
        owner = Number(readFileSync(join(dir, "owner"), "utf8"));
      } catch {
        // owner file not written yet, or lock just released
      }
      const stale = Number.isInteger(owner) && owner > 0 && !isAlive(owner);
      const orphan = !Number.isInteger(owner) && Date.now() - safeMtime(dir) > 5_000;
      if (stale || orphan) {
        rmSync(dir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw fail(`timed out waiting for lock ${describe(dir)} held by pid ${owner}`);
      await sleep(pollMs);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
