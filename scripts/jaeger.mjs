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
import { mkdirSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { goTool } from "./go-tool.mjs";
import {
  awaitRecorded,
  canConnect as canConnectTo,
  commandLine,
  ownedServiceStop,
  pidRecord,
  runAsProgram,
  serviceTools,
  spawnService,
  stopPid as stopOwnPid,
  stopRecorded,
  waitUntilAnswers,
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

const tool = goTool({
  what: "Jaeger",
  toolDir,
  goModFile,
  goSumFile,
  binFile,
  stampFile,
  buildLogFile,
  buildLockDir,
  lockWaitMs: 45 * 60_000,
  pkg: JAEGER_PACKAGE,
  ldflags: () => `-s -w -X ${JAEGER_MODULE}/internal/version.latestVersion=${jaegerVersion()}`,
  version: jaegerVersion,
  firstBuildNote: "the first build on a machine downloads ~1.2 GB of modules and takes ~4 min on 2 cores",
  fail,
  say,
  rel,
});
const isBuilt = () => tool.isBuilt();

/**
 * Build .tools/bin/jaeger unless the binary for this go.mod/go.sum is already there. Waits for a
 * build that another process is running (e.g. `node scripts/jaeger.mjs build &` in .ci/run).
 */
export function buildJaeger() {
  return tool.build();
}

// ---------------------------------------------------------------------------------------- start

function launchJaeger() {
  mkdirSync(home, { recursive: true });
  // Jaeger's own telemetry must not follow the OTEL_* settings meant for the code under test.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  return spawnService(binFile, ["--config", configFile], { cwd: home, env, logFile });
}

function waitUntilReady(pid, state, timeoutMs) {
  return waitUntilAnswers({
    pid,
    state,
    answers: async () => (await jaegerAnswers()) && (await canConnect(OTLP_HTTP_PORT)),
    timeoutMs,
    what: "Jaeger",
    command: commandLine(rel(binFile), ["--config", rel(configFile)]),
    logFile,
    notReady: `${HOST}:${HEALTH_PORT}/status and ${QUERY_URL}/api/services must answer 200`,
    fail,
    rel,
  });
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
    const recorded = await awaitRecorded(jaegerPid, jaegerAnswers, { tries: 100, pollMs: 100 });
    if (recorded.answered) return reused;
    if (recorded.still()) {
      throw fail(
        `a Jaeger (pid ${recorded.pid}, from ${rel(pidFile)}) is running but does not answer on ` +
          `${HOST}:${HEALTH_PORT}/status and ${QUERY_URL}/api/services; stop it with \`node scripts/jaeger.mjs stop\` (log: ${rel(logFile)})`,
      );
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
