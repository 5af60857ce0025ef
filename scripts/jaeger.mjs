#!/usr/bin/env node
// A real Jaeger v2 (OTLP in, memory storage, query API out) on 127.0.0.1 for the tests, without
// Docker: the `jaeger` binary is built once from the Go module proxy as a tool of the tiny module
// tools/jaeger (go.mod + go.sum) into .tools/bin/jaeger and runs with tools/jaeger/config.yaml.
// See tools/jaeger/README.md.
//
//   import { ensureJaeger } from "./jaeger.mjs";
//   const jaeger = await ensureJaeger();
//   // { otlpHttpEndpoint: "http://127.0.0.1:4318", queryUrl: "http://127.0.0.1:16686", stop() }
//
//   node scripts/jaeger.mjs build    build .tools/bin/jaeger unless it is up to date (waits for a build in progress)
//   node scripts/jaeger.mjs start    start (or reuse) a Jaeger, leave it running, print its two env lines
//   node scripts/jaeger.mjs stop     stop the Jaeger recorded in .tools/jaeger/jaeger.pid (that pid only)
//   node scripts/jaeger.mjs status   say whether it is running; exit 0 when it answers
//
// Environment: JAEGER_QUERY_URL + OTEL_EXPORTER_OTLP_ENDPOINT (both set: use that Jaeger, start
// nothing), JAEGER_START_TIMEOUT_MS (60000), GO (go command, default `go`).
//
// Only node built-ins; plain ESM so that it runs before anything is installed or compiled.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { indent, isAlive, stopPid as stopOwnPid, tieToThisProcess, withDirLock, positiveIntEnv } from "./local-process.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const toolDir = join(root, "tools", "jaeger");
const goModFile = join(toolDir, "go.mod");
const goSumFile = join(toolDir, "go.sum");
const configFile = join(toolDir, "config.yaml");
const binDir = join(root, ".tools", "bin");
const binFile = join(binDir, "jaeger");
const stampFile = join(binDir, "jaeger.stamp");
const home = join(root, ".tools", "jaeger");
const buildLogFile = join(home, "build.log");
const logFile = join(home, "jaeger.log");
const pidFile = join(home, "jaeger.pid");
const lockDir = join(home, ".lock");
const buildLockDir = join(home, ".build-lock");

// The ports are those of tools/jaeger/config.yaml.
const HOST = "127.0.0.1";
const OTLP_GRPC_PORT = 4317;
const OTLP_HTTP_PORT = 4318;
const QUERY_GRPC_PORT = 16685;
const QUERY_HTTP_PORT = 16686;
const HEALTH_PORT = 13133;
const PORTS = [OTLP_GRPC_PORT, OTLP_HTTP_PORT, QUERY_GRPC_PORT, QUERY_HTTP_PORT, HEALTH_PORT];
const OTLP_HTTP_ENDPOINT = `http://${HOST}:${OTLP_HTTP_PORT}`;
const QUERY_URL = `http://${HOST}:${QUERY_HTTP_PORT}`;

const JAEGER_PACKAGE = "github.com/jaegertracing/jaeger/cmd/jaeger";
const JAEGER_MODULE = "github.com/jaegertracing/jaeger";

const noop = async () => {};
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const say = (line) => process.stderr.write(`jaeger: ${line}\n`);
const rel = (p) => relative(process.cwd(), p) || ".";
const secs = (ms) => (ms / 1000).toFixed(1);

class JaegerError extends Error {
  constructor(message) {
    super(message);
    this.name = "JaegerError";
  }
}

function intEnv(name, fallback) {
  return positiveIntEnv(name, fallback, (message) => {
    throw new JaegerError(message);
  });
}

/** The Jaeger version that tools/jaeger/go.mod requires, e.g. "v1.76.0". */
function jaegerVersion() {
  const escaped = JAEGER_MODULE.replace(/[./]/g, "\\$&");
  const m = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, "m").exec(readFileSync(goModFile, "utf8"));
  return m?.[1] ?? "unknown";
}

function tail(text, lines = 40) {
  const all = text
    .replace(/\x1b\[[0-9;]*m/g, "")
    .split("\n")
    .filter((l) => !/^go: (downloading|finding|extracting) /.test(l)) // download chatter hides the error
    .join("\n")
    .trimEnd()
    .split("\n");
  return all.slice(-lines).join("\n");
}

function tailOfFile(file, lines = 40) {
  try {
    return tail(readFileSync(file, "utf8"), lines);
  } catch {
    return "(no log)";
  }
}


function commandLine(cmd, args) {
  return [cmd, ...args].map((a) => (/[\s"]/.test(a) ? JSON.stringify(a) : a)).join(" ");
}

/** True when a TCP connection to 127.0.0.1:port succeeds within timeoutMs. */
function canConnect(port, timeoutMs = 1000) {
  return new Promise((done) => {
    const socket = connect({ host: HOST, port });
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

/** GET http://127.0.0.1:port/path → { status, body }, or undefined if nothing answers in time. */
function httpGet(port, path, timeoutMs = 2000) {
  return new Promise((done) => {
    const req = request({ host: HOST, port, path, method: "GET", agent: false, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => done({ status: res.statusCode, body }));
      res.on("error", () => done(undefined));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(undefined));
    req.end();
  });
}

/** Jaeger's healthcheck says healthy and its query API lists services: it takes and serves traces. */
async function jaegerAnswers() {
  const [health, services] = await Promise.all([httpGet(HEALTH_PORT, "/status"), httpGet(QUERY_HTTP_PORT, "/api/services")]);
  if (health?.status !== 200 || services?.status !== 200) return false;
  try {
    return "data" in JSON.parse(services.body);
  } catch {
    return false;
  }
}


/** The pid in .tools/jaeger/jaeger.pid if that process is alive and is our Jaeger, else undefined. */
function recordedJaegerPid() {
  let pid;
  try {
    pid = Number(readFileSync(pidFile, "utf8").trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return undefined;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    if (!cmdline.includes(configFile)) return undefined; // pid reused by something else
  } catch {
    // no /proc: trust the pid file
  }
  return pid;
}

function removePidFile(pid) {
  try {
    if (Number(readFileSync(pidFile, "utf8").trim()) === pid) rmSync(pidFile);
  } catch {
    // already gone
  }
}

/** SIGTERM this pid only, wait up to graceMs, then SIGKILL this pid only. */
function stopPid(pid, graceMs = 10_000) {
  return stopOwnPid(pid, { graceMs, pollMs: 50, say, fail: (message) => new JaegerError(message) });
}


/** A cross-process lock, so that two callers never build or start at once. */
function withLock(dir, maxWaitMs, fn) {
  return withDirLock(dir, { maxWaitMs, pollMs: 250, fail: (m) => new JaegerError(m), describe: rel }, fn);
}

// ---------------------------------------------------------------------------------------- build

function buildArgs(output) {
  return [
    "build",
    "-mod=readonly", // exactly tools/jaeger/go.mod + go.sum, whatever GOFLAGS says
    "-trimpath",
    "-p",
    "2",
    // -s -w: no symbol table / DWARF (stack traces keep names and lines); -X: what `jaeger version` prints
    "-ldflags",
    `-s -w -X ${JAEGER_MODULE}/internal/version.latestVersion=${jaegerVersion()}`,
    "-o",
    output,
    JAEGER_PACKAGE,
  ];
}

/** What the binary was built from: go.mod, go.sum and the build command. */
function buildStamp() {
  const hash = createHash("sha256");
  hash.update(readFileSync(goModFile));
  hash.update("\0");
  hash.update(readFileSync(goSumFile));
  hash.update("\0");
  hash.update(JSON.stringify(buildArgs("BIN")));
  return hash.digest("hex");
}

function isBuilt() {
  try {
    accessSync(binFile, constants.X_OK);
    return readFileSync(stampFile, "utf8").trim() === buildStamp();
  } catch {
    return false;
  }
}

/**
 * Build .tools/bin/jaeger unless the binary for this go.mod/go.sum is already there. Waits for a
 * build that another process is running (e.g. `node scripts/jaeger.mjs build &` in .ci/run).
 */
export async function buildJaeger() {
  if (isBuilt()) return { built: false, ms: 0 };
  return withLock(buildLockDir, 45 * 60_000, async () => {
    if (isBuilt()) return { built: false, ms: 0 }; // another process built it while we waited
    const t0 = Date.now();
    await runGoBuild();
    return { built: true, ms: Date.now() - t0 };
  });
}

async function runGoBuild() {
  mkdirSync(binDir, { recursive: true });
  const stamp = buildStamp();
  const tmp = `${binFile}.tmp-${process.pid}`;
  const go = process.env.GO || "go";
  const args = buildArgs(tmp);
  say(
    `building Jaeger ${jaegerVersion()} into ${rel(binFile)} (go build in ${rel(toolDir)}; ` +
      `the first build on a machine downloads ~1.2 GB of modules and takes ~4 min on 2 cores; log ${rel(buildLogFile)})`,
  );
  const out = openSync(buildLogFile, "w");
  writeFileSync(out, `$ (cd ${toolDir} && CGO_ENABLED=0 ${commandLine(go, args)})\n`);
  let child;
  try {
    child = spawn(go, args, { cwd: toolDir, env: { ...process.env, CGO_ENABLED: "0" }, stdio: ["ignore", out, out] });
  } finally {
    closeSync(out);
  }
  // Interrupted: end the go build (our child) and let the lock and the temporary file be cleaned up.
  let interrupted;
  const onSignal = (signal) => {
    interrupted = signal;
    try {
      child.kill("SIGINT");
    } catch {
      // already gone
    }
  };
  const signals = ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const s of signals) process.on(s, onSignal);
  const t0 = Date.now();
  const result = await new Promise((done) => {
    child.once("error", (err) => done({ err }));
    child.once("exit", (code, signal) => done({ code, signal }));
  });
  for (const s of signals) process.removeListener(s, onSignal);
  const line = `(cd ${rel(toolDir)} && CGO_ENABLED=0 ${commandLine(go, buildArgs(rel(binFile)))})`;
  if (result.err || result.code !== 0 || interrupted) {
    rmSync(tmp, { force: true });
    if (interrupted) throw new JaegerError(`building Jaeger was interrupted (${interrupted})`);
    if (result.err) {
      const hint = result.err.code === "ENOENT" ? ` (is Go ${goDirective()} or newer installed and on PATH? set GO to use another go)` : "";
      throw new JaegerError(`building Jaeger failed: cannot run ${go}: ${result.err.message}${hint}\n  command: ${line}`);
    }
    throw new JaegerError(
      `building Jaeger failed (exit ${result.code ?? result.signal} after ${secs(Date.now() - t0)} s)\n  command: ${line}\n` +
        `  log ${rel(buildLogFile)}, last 40 lines:\n${indent(tailOfFile(buildLogFile))}`,
    );
  }
  renameSync(tmp, binFile);
  writeFileSync(stampFile, `${stamp}\n`);
  say(`built ${rel(binFile)} in ${secs(Date.now() - t0)} s (${(statSync(binFile).size / 1e6).toFixed(0)} MB)`);
}

function goDirective() {
  return /^go\s+(\S+)/m.exec(readFileSync(goModFile, "utf8"))?.[1] ?? "";
}

// ---------------------------------------------------------------------------------------- start

function launchJaeger() {
  mkdirSync(home, { recursive: true });
  const out = openSync(logFile, "w");
  // Jaeger's own telemetry must not follow the OTEL_* settings meant for the code under test.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  let child;
  try {
    child = spawn(binFile, ["--config", configFile], { cwd: home, env, detached: true, stdio: ["ignore", out, out] });
  } finally {
    closeSync(out);
  }
  const state = { exited: false, code: null, signal: null, spawnError: null };
  child.on("exit", (code, signal) => Object.assign(state, { exited: true, code, signal }));
  child.on("error", (err) => Object.assign(state, { exited: true, spawnError: err }));
  child.unref();
  return { child, state };
}

async function waitUntilReady(pid, state, timeoutMs) {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (state.exited || !isAlive(pid)) {
      const how = state.spawnError
        ? `could not be started: ${state.spawnError.message}`
        : `exited (${state.signal ?? `code ${state.code ?? "?"}`}) before it was ready`;
      throw new JaegerError(
        `Jaeger ${how}\n  command: ${commandLine(rel(binFile), ["--config", rel(configFile)])}\n` +
          `  log ${rel(logFile)}, last 40 lines:\n${indent(tailOfFile(logFile))}`,
      );
    }
    if ((await jaegerAnswers()) && (await canConnect(OTLP_HTTP_PORT))) return Date.now() - started;
    await sleep(100);
  }
  throw new JaegerError(
    `Jaeger pid ${pid} not ready after ${timeoutMs / 1000} s (${HOST}:${HEALTH_PORT}/status and ${QUERY_URL}/api/services ` +
      `must answer 200)\n  log ${rel(logFile)}, last 40 lines:\n${indent(tailOfFile(logFile))}`,
  );
}

async function startJaeger() {
  const t0 = Date.now();
  const taken = [];
  for (const port of PORTS) if (await canConnect(port, 300)) taken.push(port);
  if (taken.length > 0) {
    throw new JaegerError(
      `cannot start Jaeger: ${taken.map((p) => `${HOST}:${p}`).join(", ")} already in use by another process ` +
        `(not a Jaeger answering on ${HOST}:${HEALTH_PORT}/status and ${QUERY_URL}/api/services); ` +
        `or point the tests at a running Jaeger with JAEGER_QUERY_URL and OTEL_EXPORTER_OTLP_ENDPOINT`,
    );
  }
  const { built, ms: buildMs } = await buildJaeger();
  const tStart = Date.now();
  const { child, state } = launchJaeger();
  const pid = child.pid;
  if (pid === undefined) {
    await sleep(50);
    throw new JaegerError(`could not start ${rel(binFile)}: ${state.spawnError?.message ?? "no pid"}`);
  }
  writeFileSync(pidFile, `${pid}\n`);
  try {
    await waitUntilReady(pid, state, intEnv("JAEGER_START_TIMEOUT_MS", 60_000));
  } catch (err) {
    await stopPid(pid, 5_000).catch(() => {});
    removePidFile(pid);
    throw err;
  }
  say(
    `Jaeger ${jaegerVersion()} pid ${pid} ready in ${secs(Date.now() - t0)} s ` +
      `(${built ? `build ${secs(buildMs)} s, ` : ""}start ${secs(Date.now() - tStart)} s): ` +
      `OTLP ${OTLP_HTTP_ENDPOINT}, query ${QUERY_URL}; log ${rel(logFile)}`,
  );
  return pid;
}

/**
 * A Jaeger for the tests: the one named by JAEGER_QUERY_URL + OTEL_EXPORTER_OTLP_ENDPOINT if both
 * are set; else one that already answers on 127.0.0.1 (healthcheck :13133, query :16686); else a
 * fresh one started here (built first if needed). `stop()` stops only a Jaeger this call started.
 * A Jaeger started here is also stopped if this process is interrupted (SIGINT, SIGTERM, SIGHUP)
 * or exits without calling stop(); `node scripts/jaeger.mjs start` is what leaves one running.
 *
 * @returns {Promise<{ otlpHttpEndpoint: string, queryUrl: string, stop(): Promise<void> }>}
 */
export async function ensureJaeger() {
  return startOrReuse({ tiedToThisProcess: true });
}

async function startOrReuse({ tiedToThisProcess }) {
  const queryUrl = process.env.JAEGER_QUERY_URL?.trim();
  const otlp = process.env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (queryUrl && otlp) return { otlpHttpEndpoint: otlp.replace(/\/+$/, ""), queryUrl: queryUrl.replace(/\/+$/, ""), stop: noop };
  const reused = { otlpHttpEndpoint: OTLP_HTTP_ENDPOINT, queryUrl: QUERY_URL, stop: noop };
  return withLock(lockDir, 50 * 60_000, async () => {
    if (await jaegerAnswers()) return reused;
    // A recorded Jaeger that is alive but does not answer is starting or stopping: give it a
    // while to do either before deciding.
    const recorded = recordedJaegerPid();
    if (recorded !== undefined) {
      for (let i = 0; i < 100 && isAlive(recorded); i++) {
        if (await jaegerAnswers()) return reused;
        await sleep(100);
      }
      if (isAlive(recorded)) {
        throw new JaegerError(
          `a Jaeger (pid ${recorded}, from ${rel(pidFile)}) is running but does not answer on ` +
            `${HOST}:${HEALTH_PORT}/status and ${QUERY_URL}/api/services; stop it with \`node scripts/jaeger.mjs stop\` (log: ${rel(logFile)})`,
        );
      }
    }
    const pid = await startJaeger();
    let stopped;
    const untie = tiedToThisProcess ? tieToThisProcess(pid, () => stop(), { say, what: "Jaeger" }) : () => {};
    const stop = () => {
      untie();
      stopped ??= stopPid(pid).finally(() => removePidFile(pid));
      return stopped.then(() => {});
    };
    return { otlpHttpEndpoint: OTLP_HTTP_ENDPOINT, queryUrl: QUERY_URL, stop };
  });
}


async function cli(command) {
  switch (command) {
    case "build": {
      const { built } = await buildJaeger();
      if (!built) say(`${rel(binFile)} is up to date (Jaeger ${jaegerVersion()})`);
      return 0;
    }
    case "start": {
      const jaeger = await startOrReuse({ tiedToThisProcess: false });
      process.stdout.write(`OTEL_EXPORTER_OTLP_ENDPOINT=${jaeger.otlpHttpEndpoint}\nJAEGER_QUERY_URL=${jaeger.queryUrl}\n`);
      return 0;
    }
    case "stop": {
      const pid = recordedJaegerPid();
      if (pid === undefined) {
        rmSync(pidFile, { force: true });
        say(`no Jaeger recorded in ${rel(pidFile)} is running`);
        return 0;
      }
      const t0 = Date.now();
      const how = await stopPid(pid);
      removePidFile(pid);
      say(`Jaeger pid ${pid} ${how} in ${secs(Date.now() - t0)} s`);
      return 0;
    }
    case "status": {
      const pid = recordedJaegerPid();
      const ok = await jaegerAnswers();
      const who = pid === undefined ? `no Jaeger recorded in ${rel(pidFile)}` : `Jaeger pid ${pid}`;
      const built = isBuilt() ? `${rel(binFile)} up to date` : `${rel(binFile)} not built (or stale)`;
      say(`${who}; ${QUERY_URL} ${ok ? "answers" : "does not answer"}; ${built}`);
      return ok ? 0 : 1;
    }
    default:
      process.stderr.write("usage: node scripts/jaeger.mjs build|start|stop|status\n");
      return 2;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  cli(process.argv[2]).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`jaeger: ${err instanceof JaegerError ? err.message : (err?.stack ?? String(err))}\n`);
      process.exit(1);
    },
  );
}
