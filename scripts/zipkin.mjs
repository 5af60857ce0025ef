#!/usr/bin/env node
// A Zipkin server (trace UI and API, in-memory storage) on 127.0.0.1 without Docker: its
// self-contained exec jar (io.zipkin:zipkin-server, classifier exec) is fetched once with Maven
// (tools/zipkin/pom.xml) into .tools/zipkin/lib and runs as `java -jar`. See tools/zipkin/README.md.
//
//   import { ensureZipkin } from "./zipkin.mjs";
//   const zipkin = await ensureZipkin();
//   // { url: "http://127.0.0.1:9411", spansEndpoint: "http://127.0.0.1:9411/api/v2/spans", stop() }
//
//   node scripts/zipkin.mjs fetch    fetch the jar unless it is there (nothing else)
//   node scripts/zipkin.mjs start    start (or reuse) a Zipkin, leave it running, print its two env lines
//   node scripts/zipkin.mjs stop     stop the Zipkin recorded in .tools/zipkin/zipkin.pid (that pid only)
//   node scripts/zipkin.mjs status   say whether it is running; exit 0 when it answers
//
// Environment: ZIPKIN_URL (use that Zipkin, start nothing), ZIPKIN_PORT (9411),
// ZIPKIN_START_TIMEOUT_MS (180000: a Spring Boot start takes 10 s here idle, 80 s at load 30),
// ZIPKIN_JAVA_OPTS (JVM options), JAVA_HOME (java to use), MVN (maven command, default `mvn`).
//
// Only node built-ins; plain ESM so that it runs before anything is compiled.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  awaitRecorded,
  indent,
  ownedServiceStop,
  pidRecord,
  runAsProgram,
  serviceTools,
  spawnService,
  stopPid as stopOwnPid,
  stopRecorded,
  tailOfText,
  waitUntilAnswers,
  withDirLock,
} from "./local-process.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const pomFile = join(root, "tools", "zipkin", "pom.xml");
const home = join(root, ".tools", "zipkin");
const libDir = join(home, "lib");
const stampFile = join(libDir, ".pom.sha256");
const logFile = join(home, "zipkin.log");
const pidFile = join(home, "zipkin.pid");
const lockDir = join(home, ".lock");
const fetchLockDir = join(home, ".fetch-lock");

const HOST = "127.0.0.1";
const DEFAULT_JAVA_OPTS = ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"];

const { fail, say, intEnv, rel } = serviceTools("zipkin");
const port = () => intEnv("ZIPKIN_PORT", 9411);
const urlOf = (p) => `http://${HOST}:${p}`;
const noop = async () => {};
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const secs = (ms) => (ms / 1000).toFixed(1);

function zipkinVersion() {
  return /<zipkin\.version>\s*([^<\s]+)\s*<\/zipkin\.version>/.exec(readFileSync(pomFile, "utf8"))?.[1] ?? "?";
}

const jarFile = () => join(libDir, `zipkin-server-${zipkinVersion()}-exec.jar`);
/** A recorded pid counts only while it runs our jar. */
const zipkinPid = pidRecord(pidFile, "zipkin-server-");

function javaCommand() {
  return process.env.JAVA_HOME ? join(process.env.JAVA_HOME, "bin", "java") : "java";
}

function stopPid(pid, graceMs = 20_000) {
  return stopOwnPid(pid, { graceMs, pollMs: 100, say, fail });
}

/** Zipkin's health says UP and its API lists services: it takes and serves spans. */
async function zipkinAnswers(base = urlOf(port())) {
  try {
    const [health, services] = await Promise.all([
      fetch(`${base}/health`, { signal: AbortSignal.timeout(3000) }),
      fetch(`${base}/api/v2/services`, { signal: AbortSignal.timeout(3000) }),
    ]);
    if (!health.ok || !services.ok) return false;
    return (await health.json()).status === "UP" && Array.isArray(await services.json());
  } catch {
    return false;
  }
}

/** Fetch the exec jar into .tools/zipkin/lib unless the one for this pom.xml is already there. */
export async function fetchZipkin() {
  const pomHash = createHash("sha256").update(readFileSync(pomFile)).digest("hex");
  const fresh = () => existsSync(stampFile) && readFileSync(stampFile, "utf8").trim() === pomHash && existsSync(jarFile());
  if (fresh()) return { fetched: false };
  return withDirLock(fetchLockDir, { maxWaitMs: 15 * 60_000, pollMs: 250, fail, describe: rel }, async () => {
    if (fresh()) return { fetched: false }; // another process fetched it while we waited
    say(`fetching the Zipkin ${zipkinVersion()} server jar (≈ 135 MB) with Maven into ${rel(libDir)} (first use only)`);
    const t0 = Date.now();
    const tmp = `${libDir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    try {
      const args = [
        "-B",
        "-q",
        "-f",
        pomFile,
        "org.apache.maven.plugins:maven-dependency-plugin:3.11.0:copy-dependencies",
        "-DincludeScope=runtime",
        "-DexcludeTransitive=true",
        `-DoutputDirectory=${tmp}`,
      ];
      const mvn = process.env.MVN || "mvn";
      const res = spawnSync(mvn, args, { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
      const line = [mvn, ...args].join(" ");
      if (res.error)
        throw fail(
          `fetching the Zipkin jar failed: cannot run ${mvn}: ${res.error.message}${res.error.code === "ENOENT" ? " (is Maven installed and on PATH?)" : ""}\n  command: ${line}`,
        );
      if (res.status !== 0) {
        throw fail(
          `fetching the Zipkin jar failed (exit ${res.status ?? res.signal})\n  command: ${line}\n  last lines of its output:\n${indent(tailOfText(`${res.stdout}\n${res.stderr}`))}`,
        );
      }
      const jars = existsSync(tmp) ? readdirSync(tmp).filter((f) => f.endsWith(".jar")) : [];
      if (!jars.includes(`zipkin-server-${zipkinVersion()}-exec.jar`))
        throw fail(`Maven finished but ${rel(tmp)} has no zipkin-server exec jar (found: ${jars.join(", ") || "nothing"})`);
      writeFileSync(join(tmp, ".pom.sha256"), `${pomHash}\n`);
      rmSync(libDir, { recursive: true, force: true });
      renameSync(tmp, libDir);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    say(`fetched ${rel(jarFile())} in ${secs(Date.now() - t0)} s`);
    return { fetched: true };
  });
}

function javaOpts() {
  const raw = process.env.ZIPKIN_JAVA_OPTS;
  return raw && raw.trim() ? raw.trim().split(/\s+/) : DEFAULT_JAVA_OPTS;
}

function launch(p) {
  mkdirSync(home, { recursive: true });
  // In-memory storage, no self-tracing; its own telemetry must not follow the OTEL_* settings meant
  // for the code under test. One listener, on 127.0.0.1 only (Armeria's port list, replaced whole).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_")));
  Object.assign(env, { STORAGE_TYPE: "mem", SELF_TRACING_ENABLED: "false", QUERY_PORT: String(p) });
  const args = [...javaOpts(), "-jar", jarFile(), `--armeria.ports[0].ip=${HOST}`, `--armeria.ports[0].port=${p}`, "--armeria.ports[0].protocols=http"];
  return spawnService(javaCommand(), args, { cwd: home, env, logFile });
}

async function startZipkin() {
  const t0 = Date.now();
  const { fetched } = await fetchZipkin();
  const tStart = Date.now();
  const p = port();
  const { child, state } = launch(p);
  const pid = child.pid;
  if (pid === undefined) {
    await sleep(50);
    throw fail(`could not start ${javaCommand()}: ${state.spawnError?.message ?? "no pid"}`);
  }
  zipkinPid.write(pid);
  try {
    await waitUntilAnswers({
      pid,
      state,
      answers: () => zipkinAnswers(urlOf(p)),
      timeoutMs: intEnv("ZIPKIN_START_TIMEOUT_MS", 180_000),
      pollMs: 250,
      what: "Zipkin",
      command: javaCommand(),
      logFile,
      notReady: `${urlOf(p)}/health must say UP`,
      fail,
      rel,
    });
  } catch (err) {
    await stopPid(pid, 5_000).catch(() => {});
    zipkinPid.remove(pid);
    throw err;
  }
  say(
    `Zipkin ${zipkinVersion()} pid ${pid} ready on ${urlOf(p)} in ${secs(Date.now() - t0)} s (${fetched ? `fetch ${secs(tStart - t0)} s, ` : ""}start ${secs(Date.now() - tStart)} s); log ${rel(logFile)}`,
  );
  return pid;
}

/**
 * A Zipkin for the tests: ZIPKIN_URL if set; else one that already answers on 127.0.0.1:ZIPKIN_PORT
 * (9411); else a fresh one started here (the jar fetched first if needed). `stop()` stops only a
 * Zipkin this call started; one started here is also stopped if this process is interrupted or
 * exits without calling stop(). `node scripts/zipkin.mjs start` is what leaves one running.
 *
 * @returns {Promise<{ url: string, spansEndpoint: string, stop(): Promise<void> }>}
 */
export async function ensureZipkin() {
  return startOrReuse({ tiedToThisProcess: true });
}

async function startOrReuse({ tiedToThisProcess }) {
  const fromEnv = process.env.ZIPKIN_URL?.trim().replace(/\/+$/, "");
  if (fromEnv) return { url: fromEnv, spansEndpoint: `${fromEnv}/api/v2/spans`, stop: noop };
  const url = urlOf(port());
  const reused = { url, spansEndpoint: `${url}/api/v2/spans`, stop: noop };
  mkdirSync(home, { recursive: true });
  return withDirLock(lockDir, { maxWaitMs: 20 * 60_000, pollMs: 250, fail, describe: rel }, async () => {
    if (await zipkinAnswers()) return reused;
    // A recorded Zipkin that is alive but does not answer is starting or stopping: give it a while.
    const recorded = await awaitRecorded(zipkinPid, () => zipkinAnswers(), { tries: 120, pollMs: 250 });
    if (recorded.answered) return reused;
    if (recorded.still()) {
      throw fail(
        `a Zipkin (pid ${recorded.pid}, from ${rel(pidFile)}) is running but ${url}/health does not answer UP; stop it with \`node scripts/zipkin.mjs stop\` (log: ${rel(logFile)})`,
      );
    }
    const pid = await startZipkin();
    const stop = ownedServiceStop(pid, { stopPid, record: zipkinPid, tied: tiedToThisProcess, say, what: "Zipkin" });
    return { ...reused, stop };
  });
}

async function cli(command) {
  switch (command) {
    case "fetch": {
      const { fetched } = await fetchZipkin();
      if (!fetched) say(`${rel(jarFile())} is there (Zipkin ${zipkinVersion()})`);
      return 0;
    }
    case "start": {
      const zipkin = await startOrReuse({ tiedToThisProcess: false });
      process.stdout.write(`ZIPKIN_URL=${zipkin.url}\nOTEL_EXPORTER_ZIPKIN_ENDPOINT=${zipkin.spansEndpoint}\n`);
      return 0;
    }
    case "stop":
      return stopRecorded(zipkinPid, { stopPid, say, what: "Zipkin" });
    case "status": {
      const pid = zipkinPid.read();
      const ok = await zipkinAnswers();
      say(`${pid === undefined ? `no Zipkin recorded in ${rel(pidFile)}` : `Zipkin pid ${pid}`}; ${urlOf(port())} ${ok ? "answers" : "does not answer"}`);
      return ok ? 0 : 1;
    }
    default:
      process.stderr.write("usage: node scripts/zipkin.mjs fetch|start|stop|status\n");
      return 2;
  }
}

runAsProgram(import.meta.url, "zipkin", cli);
