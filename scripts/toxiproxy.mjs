#!/usr/bin/env node
// A real Toxiproxy (a TCP proxy whose connections can be cut on request) on 127.0.0.1 for the fault
// harness (test/faults), without Docker: `toxiproxy-server` is built once from the Go module proxy as
// a tool of the tiny module tools/toxiproxy (go.mod + go.sum) into .tools/bin/toxiproxy-server, as
// scripts/jaeger.mjs builds Jaeger. It is driven over its HTTP API. See tools/toxiproxy/README.md.
//
//   import { ensureToxiproxy } from "./toxiproxy.mjs";
//   const toxiproxy = await ensureToxiproxy();   // { apiUrl: "http://127.0.0.1:8474", stop() }
//
//   node scripts/toxiproxy.mjs build    build .tools/bin/toxiproxy-server unless it is up to date (waits for a build in progress)
//   node scripts/toxiproxy.mjs start    start (or reuse) a Toxiproxy, leave it running, print TOXIPROXY_URL=…
//   node scripts/toxiproxy.mjs stop     stop the Toxiproxy recorded in .tools/toxiproxy/toxiproxy.pid (that pid only)
//   node scripts/toxiproxy.mjs status   say whether it is running; exit 0 when its API answers
//
// Environment: TOXIPROXY_URL (use that Toxiproxy, start nothing), TOXIPROXY_PORT (8474, its HTTP
// API), TOXIPROXY_START_TIMEOUT_MS (30000), GO (go command, default `go`).
//
// Only node built-ins; plain ESM so that it runs before anything is installed or compiled.
import { mkdirSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { goTool } from "./go-tool.mjs";
import {
  canConnect,
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
const toolDir = join(root, "tools", "toxiproxy");
const goModFile = join(toolDir, "go.mod");
const goSumFile = join(toolDir, "go.sum");
const binDir = join(root, ".tools", "bin");
const binFile = join(binDir, "toxiproxy-server");
const stampFile = join(binDir, "toxiproxy-server.stamp");
const home = join(root, ".tools", "toxiproxy");
const buildLogFile = join(home, "build.log");
const logFile = join(home, "toxiproxy.log");
const pidFile = join(home, "toxiproxy.pid");
/** A recorded pid counts only while it runs our binary. */
const toxiproxyPid = pidRecord(pidFile, "toxiproxy-server");
const lockDir = join(home, ".lock");
const buildLockDir = join(home, ".build-lock");

const HOST = "127.0.0.1";
const TOXIPROXY_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server";
const TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2";

const noop = async () => {};
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const { fail, say, intEnv, rel } = serviceTools("toxiproxy");
const secs = (ms) => (ms / 1000).toFixed(1);
const apiPort = () => intEnv("TOXIPROXY_PORT", 8474);
const apiUrl = () => `http://${HOST}:${apiPort()}`;

/** The Toxiproxy version that tools/toxiproxy/go.mod requires, e.g. "v2.12.0". */
function toxiproxyVersion() {
  const escaped = TOXIPROXY_MODULE.replace(/[./]/g, "\\$&");
  const m = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, "m").exec(readFileSync(goModFile, "utf8"));
  return m?.[1] ?? "unknown";
}

/** GET <api>/version → true when Toxiproxy answers. */
function toxiproxyAnswers(url = apiUrl(), timeoutMs = 2000) {
  return new Promise((done) => {
    const req = request(`${url}/version`, { method: "GET", agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode === 200));
      res.on("error", () => done(false));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(false));
    req.end();
  });
}

function stopPid(pid, graceMs = 5_000) {
  return stopOwnPid(pid, { graceMs, pollMs: 50, say, fail });
}

function withLock(dir, maxWaitMs, fn) {
  return withDirLock(dir, { maxWaitMs, pollMs: 250, fail, describe: rel }, fn);
}

// ---------------------------------------------------------------------------------------- build

const tool = goTool({
  what: "Toxiproxy",
  toolDir,
  goModFile,
  goSumFile,
  binFile,
  stampFile,
  buildLogFile,
  buildLockDir,
  lockWaitMs: 20 * 60_000,
  pkg: TOXIPROXY_PACKAGE,
  ldflags: () => `-s -w -X ${TOXIPROXY_MODULE}.Version=${toxiproxyVersion()}`,
  version: toxiproxyVersion,
  firstBuildNote: "~1 min on 2 cores the first time",
  fail,
  say,
  rel,
});
const isBuilt = () => tool.isBuilt();

/** Build .tools/bin/toxiproxy-server unless it is there for this go.mod/go.sum; waits for a build in progress. */
export function buildToxiproxy() {
  return tool.build();
}

// ---------------------------------------------------------------------------------------- start

function serverArgs() {
  return ["-host", HOST, "-port", String(apiPort())];
}

async function startToxiproxy() {
  const t0 = Date.now();
  if (await canConnect(HOST, apiPort(), 300)) {
    throw fail(
      `cannot start Toxiproxy: ${HOST}:${apiPort()} is already in use by another process (not a Toxiproxy answering /version); ` +
        "set TOXIPROXY_PORT, or point the harness at a running Toxiproxy with TOXIPROXY_URL",
    );
  }
  const { built, ms: buildMs } = await buildToxiproxy();
  mkdirSync(home, { recursive: true });
  const { child, state } = spawnService(binFile, serverArgs(), { cwd: home, env: process.env, logFile });
  const pid = child.pid;
  if (pid === undefined) {
    await sleep(50);
    throw fail(`could not start ${rel(binFile)}: ${state.spawnError?.message ?? "no pid"}`);
  }
  toxiproxyPid.write(pid);
  try {
    await waitUntilAnswers({
      pid,
      state,
      answers: () => toxiproxyAnswers(),
      timeoutMs: intEnv("TOXIPROXY_START_TIMEOUT_MS", 30_000),
      what: "Toxiproxy",
      command: commandLine(rel(binFile), serverArgs()),
      logFile,
      notReady: `${apiUrl()}/version must answer 200`,
      fail,
      rel,
    });
  } catch (err) {
    await stopPid(pid).catch(() => {});
    toxiproxyPid.remove(pid);
    throw err;
  }
  say(
    `Toxiproxy ${toxiproxyVersion()} pid ${pid} ready in ${secs(Date.now() - t0)} s (${built ? `build ${secs(buildMs)} s, ` : ""}API ${apiUrl()}); log ${rel(logFile)}`,
  );
  return pid;
}

/**
 * A Toxiproxy for the fault harness: the one named by TOXIPROXY_URL if set; else one that already
 * answers on 127.0.0.1:TOXIPROXY_PORT; else a fresh one started here (built first if needed).
 * `stop()` stops only a Toxiproxy this call started, which is also stopped if this process is
 * interrupted or exits without calling stop(). Callers use proxy names of their own, so that two
 * runs can share one server.
 *
 * @returns {Promise<{ apiUrl: string, stop(): Promise<void> }>}
 */
export async function ensureToxiproxy() {
  return startOrReuse({ tiedToThisProcess: true });
}

async function startOrReuse({ tiedToThisProcess }) {
  const fromEnv = process.env.TOXIPROXY_URL?.trim();
  if (fromEnv) return { apiUrl: fromEnv.replace(/\/+$/, ""), stop: noop };
  const reused = { apiUrl: apiUrl(), stop: noop };
  return withLock(lockDir, 25 * 60_000, async () => {
    if (await toxiproxyAnswers()) return reused;
    const pid = await startToxiproxy();
    const stop = ownedServiceStop(pid, { stopPid, record: toxiproxyPid, tied: tiedToThisProcess, say, what: "Toxiproxy" });
    return { apiUrl: apiUrl(), stop };
  });
}

async function cli(command) {
  switch (command) {
    case "build": {
      const { built } = await buildToxiproxy();
      if (!built) say(`${rel(binFile)} is up to date (Toxiproxy ${toxiproxyVersion()})`);
      return 0;
    }
    case "start": {
      const toxiproxy = await startOrReuse({ tiedToThisProcess: false });
      process.stdout.write(`TOXIPROXY_URL=${toxiproxy.apiUrl}\n`);
      return 0;
    }
    case "stop":
      return stopRecorded(toxiproxyPid, { stopPid, say, what: "Toxiproxy" });
    case "status": {
      const pid = toxiproxyPid.read();
      const ok = await toxiproxyAnswers();
      const who = pid === undefined ? `no Toxiproxy recorded in ${rel(pidFile)}` : `Toxiproxy pid ${pid}`;
      const built = isBuilt() ? `${rel(binFile)} up to date` : `${rel(binFile)} not built (or stale)`;
      say(`${who}; ${apiUrl()} ${ok ? "answers" : "does not answer"}; ${built}`);
      return ok ? 0 : 1;
    }
    default:
      process.stderr.write("usage: node scripts/toxiproxy.mjs build|start|stop|status\n");
      return 2;
  }
}

runAsProgram(import.meta.url, "toxiproxy", cli);
