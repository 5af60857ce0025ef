// What the service scripts (scripts/kafka.mjs, jaeger.mjs, prometheus.mjs, zipkin.mjs,
// toxiproxy.mjs) share: reading their environment knobs, spawning a service and recording its pid,
// waiting until it answers, stopping it by that pid only, their command lines and their errors.
// Plain Node ESM, no dependencies.
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

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

/** An error a service script shows its user as it is (no stack): "kafka: <message>". */
export class LocalServiceError extends Error {
  constructor(service, message) {
    super(message);
    this.name = "LocalServiceError";
    this.service = service;
  }
}

/** The last `lines` lines of `text`, terminal colours removed and lines `drop` matches left out. */
export function tailOfText(text, { lines = 40, drop } = {}) {
  let all = text.replace(/\x1b\[[0-9;]*m/g, "").split("\n");
  if (drop) all = all.filter((l) => !drop.test(l));
  return all.join("\n").trimEnd().split("\n").slice(-lines).join("\n");
}

export function tailOfFile(file, options) {
  try {
    return tailOfText(readFileSync(file, "utf8"), options);
  } catch {
    return "(no log)";
  }
}

/** True when a TCP connection to host:port succeeds within timeoutMs. */
export function canConnect(host, port, timeoutMs = 1000) {
  return new Promise((done) => {
    const socket = connect({ host, port });
    const finish = (ok) => {
      socket.removeAllListeners();
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once("connect", () => finish(true));
    socket.once("error", () => finish(false));
  });
}

/**
 * The pid file of a service this repository starts. `read()` gives the recorded pid only while that
 * process is alive and its command line contains `marker` (a pid reused by something else is not
 * ours); `remove(pid)` deletes the file only if it still records that pid.
 */
export function pidRecord(file, marker) {
  const read = () => {
    let pid;
    try {
      pid = Number(readFileSync(file, "utf8").trim());
    } catch {
      return undefined;
    }
    if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return undefined;
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)) return undefined;
    } catch {
      // no /proc: trust the pid file
    }
    return pid;
  };
  const remove = (pid) => {
    try {
      if (Number(readFileSync(file, "utf8").trim()) === pid) rmSync(file);
    } catch {
      // already gone
    }
  };
  const write = (pid) => writeFileSync(file, `${pid}\n`);
  return { file, read, remove, write };
}

/**
 * Spawns a service detached from this process (it may outlive it), its output into `logFile`.
 * `state` follows the child: whether it exited, how, or why it could not be spawned.
 */
export function spawnService(command, args, { cwd, env, logFile }) {
  const out = openSync(logFile, "w");
  let child;
  try {
    child = spawn(command, args, { cwd, env, detached: true, stdio: ["ignore", out, out] });
  } finally {
    closeSync(out);
  }
  const state = { exited: false, code: null, signal: null, spawnError: null };
  child.on("exit", (code, signal) => Object.assign(state, { exited: true, code, signal }));
  child.on("error", (err) => Object.assign(state, { exited: true, spawnError: err }));
  child.unref();
  return { child, state };
}

/** "exited (code 1) before it was ready" or "could not start <command>: <reason>", from spawnService's state. */
export function earlyExitReason(state, command) {
  return state.spawnError
    ? `could not start ${command}: ${state.spawnError.message}`
    : `exited (${state.signal ?? `code ${state.code ?? "?"}`}) before it was ready`;
}

/**
 * The `stop()` of a service this call started: it stops that pid once (however often it is called)
 * and removes its pid file. With `tied`, the service is also stopped when this process is
 * interrupted or exits (tieToThisProcess); without, it is left running (`… start`).
 */
export function ownedServiceStop(pid, { stopPid, record, tied, say, what }) {
  let stopped;
  const untie = tied ? tieToThisProcess(pid, () => stop(), { say, what }) : () => {};
  const stop = () => {
    untie();
    stopped ??= stopPid(pid).finally(() => record.remove(pid));
    return stopped.then(() => {});
  };
  return stop;
}

/** `… stop`: stops the recorded pid only, and says how it went. */
export async function stopRecorded(record, { stopPid, say, what }) {
  const pid = record.read();
  if (pid === undefined) {
    rmSync(record.file, { force: true });
    say(`no ${what} recorded in ${relative(process.cwd(), record.file) || "."} is running`);
    return 0;
  }
  const t0 = Date.now();
  const how = await stopPid(pid);
  record.remove(pid);
  say(`${what} pid ${pid} ${how} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return 0;
}

/**
 * Runs `cli(process.argv[2])` when the script at `moduleUrl` is the program (not imported), and
 * exits with its code; a LocalServiceError is printed as its message, anything else with its stack.
 */
export function runAsProgram(moduleUrl, service, cli) {
  if (!process.argv[1] || resolve(process.argv[1]) !== fileURLToPath(moduleUrl)) return;
  cli(process.argv[2]).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`${service}: ${err instanceof LocalServiceError ? err.message : (err?.stack ?? String(err))}\n`);
      process.exit(1);
    },
  );
}

/** The small tools every service script uses, named for `service` ("kafka", "jaeger", "prometheus"). */
export function serviceTools(service) {
  const fail = (message) => new LocalServiceError(service, message);
  return {
    fail,
    say: (line) => process.stderr.write(`${service}: ${line}\n`),
    intEnv: (name, fallback) =>
      positiveIntEnv(name, fallback, (message) => {
        throw fail(message);
      }),
    rel: (p) => relative(process.cwd(), p) || ".",
  };
}

/** A command line as a person would type it (arguments with spaces or quotes quoted). */
export function commandLine(cmd, args) {
  return [cmd, ...args].map((a) => (/[\s"]/.test(a) ? JSON.stringify(a) : a)).join(" ");
}

/**
 * Waits until a service just spawned (spawnService) answers: `answers()` true. Throws `fail(…)` with
 * the end of its log when it exits first or does not answer within `timeoutMs` (`notReady` says what
 * must answer). Resolves the time it took.
 */
export async function waitUntilAnswers({ pid, state, answers, timeoutMs, pollMs = 100, what, command, logFile, notReady, fail, rel }) {
  const started = Date.now();
  const log = () => `  log ${rel(logFile)}, last 40 lines:\n${indent(tailOfFile(logFile))}`;
  for (;;) {
    if (state.exited || !isAlive(pid)) throw fail(`${what} ${earlyExitReason(state, command)}\n${log()}`);
    if (await answers()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw fail(`${what} pid ${pid} not ready after ${timeoutMs / 1000} s (${notReady})\n${log()}`);
    await sleep(pollMs);
  }
}

/**
 * A recorded service that is alive but does not answer is starting or stopping: waits up to
 * `tries × pollMs` for it to answer (true) or end (false); one still alive and silent then is an
 * error for the caller to report (`still()` true).
 */
export async function awaitRecorded(record, answers, { tries, pollMs }) {
  const recorded = record.read();
  if (recorded === undefined) return { answered: false, still: () => false };
  for (let i = 0; i < tries && isAlive(recorded); i++) {
    if (await answers()) return { answered: true, still: () => false };
    await sleep(pollMs);
  }
  return { answered: false, pid: recorded, still: () => isAlive(recorded) };
}
