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
import { accessSync, closeSync, constants, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  canConnect as canConnectTo,
  earlyExitReason,
  indent,
  isAlive,
  ownedServiceStop,
  pidRecord,
  runAsProgram,
  serviceTools,
  spawnService,
  stopPid as stopOwnPid,
  stopRecorded,
  tailOfFile as tailOfLog,
  withDirLock,
} from "./local-process.mjs";

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
/** A recorded pid counts only while it runs with our config file. */
const jaegerPid = pidRecord(pidFile, configFile);
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
const { fail, say, intEnv, rel } = serviceTools("jaeger");
const secs = (ms) => (ms / 1000).toFixed(1);

/** The Jaeger version that tools/jaeger/go.mod requires, e.g. "v1.76.0". */
function jaegerVersion() {
  const escaped = JAEGER_MODULE.replace(/[./]/g, "\\$&");
  const m = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, "m").exec(readFileSync(goModFile, "utf8"));
  return m?.[1] ?? "unknown";
}

/** The log's last lines; Go's download chatter would hide the error. */
const tailOfFile = (file) => tailOfLog(file, { drop: /^go: (downloading|finding|extracting) / });

function commandLine(cmd, args) {
  return [cmd, ...args].map((a) => (/[\s"]/.test(a) ? JSON.stringify(a) : a)).join(" ");
}

const canConnect = (port, timeoutMs) => canConnectTo(HOST, port, timeoutMs);

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


/** SIGTERM this pid only, wait up to graceMs, then SIGKILL this pid only. */
function stopPid(pid, graceMs = 10_000) {
  return stopOwnPid(pid, { graceMs, pollMs: 50, say, fail });
}


/** A cross-process lock, so that two callers never build or start at once. */
function withLock(dir, maxWaitMs, fn) {
  return withDirLock(dir, { maxWaitMs, pollMs: 250, fail, describe: rel }, fn);
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
    if (interrupted) throw fail(`building Jaeger was interrupted (${interrupted})`);
    if (result.err) {
      const hint = result.err.code === "ENOENT" ? ` (is Go ${goDirective()} or newer installed and on PATH? set GO to use another go)` : "";
      throw fail(`building Jaeger failed: cannot run ${go}: ${result.err.message}${hint}\n  command: ${line}`);
    }
    throw fail(
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
  // Jaeger's own telemetry must not follow the OTEL_* settings meant for the code under test.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  return spawnService(binFile, ["--config", configFile], { cwd: home, env, logFile });
}

async function waitUntilReady(pid, state, timeoutMs) {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (state.exited || !isAlive(pid)) {
      const how = earlyExitReason(state, rel(binFile));
      throw fail(
        `Jaeger ${how}\n  command: ${commandLine(rel(binFile), ["--config", rel(configFile)])}\n` +
          `  log ${rel(logFile)}, last 40 lines:\n${indent(tailOfFile(logFile))}`,
      );
    }
    if ((await jaegerAnswers()) && (await canConnect(OTLP_HTTP_PORT))) return Date.now() - started;
    await sleep(100);
  }
  throw fail(
    `Jaeger pid ${pid} not ready after ${timeoutMs / 1000} s (${HOST}:${HEALTH_PORT}/status and ${QUERY_URL}/api/services ` +
      `must answer 200)\n  log ${rel(logFile)}, last 40 lines:\n${indent(tailOfFile(logFile))}`,
  );
}

async function startJaeger() {
  const t0 = Date.now();
  const taken = [];
  for (const port of PORTS) if (await canConnect(port, 300)) taken.push(port);
  if (taken.length > 0) {
    throw fail(
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
    throw fail(`could not start ${rel(binFile)}: ${state.spawnError?.message ?? "no pid"}`);
  }
  jaegerPid.write(pid);
  try {
    await waitUntilReady(pid, state, intEnv("JAEGER_START_TIMEOUT_MS", 60_000));
  } catch (err) {
    await stopPid(pid, 5_000).catch(() => {});
    jaegerPid.remove(pid);
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
    const recorded = jaegerPid.read();
    if (recorded !== undefined) {
      for (let i = 0; i < 100 && isAlive(recorded); i++) {
        if (await jaegerAnswers()) return reused;
        await sleep(100);
      }
      if (isAlive(recorded)) {
        throw fail(
          `a Jaeger (pid ${recorded}, from ${rel(pidFile)}) is running but does not answer on ` +
            `${HOST}:${HEALTH_PORT}/status and ${QUERY_URL}/api/services; stop it with \`node scripts/jaeger.mjs stop\` (log: ${rel(logFile)})`,
        );
      }
    }
    const pid = await startJaeger();
    const stop = ownedServiceStop(pid, { stopPid, record: jaegerPid, tied: tiedToThisProcess, say, what: "Jaeger" });
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
    case "stop":
      return stopRecorded(jaegerPid, { stopPid, say, what: "Jaeger" });
    case "status": {
      const pid = jaegerPid.read();
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

runAsProgram(import.meta.url, "jaeger", cli);
