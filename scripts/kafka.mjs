#!/usr/bin/env node
// A real single-node Apache Kafka (KRaft) broker on 127.0.0.1 for the tests, without Docker:
// the broker jars are fetched once with Maven (tools/kafka/pom.xml) into .tools/kafka/lib and the
// broker runs as `java -cp 'lib/*' kafka.Kafka server.properties`. See tools/kafka/README.md.
//
//   import { ensureKafka } from "./kafka.mjs";
//   const kafka = await ensureKafka();   // { brokers: "127.0.0.1:19092", stop() }
//
//   node scripts/kafka.mjs start     start (or reuse) a broker, leave it running, print the brokers string
//   node scripts/kafka.mjs stop      stop the broker recorded in $KAFKA_HOME/kafka.pid (that pid only)
//   node scripts/kafka.mjs status    say whether it is running; exit 0 when the port answers
//
// Environment: KAFKA_BROKERS (use that cluster, start nothing), KAFKA_PORT (19092),
// KAFKA_CONTROLLER_PORT (KAFKA_PORT + 1), KAFKA_JAVA_OPTS (JVM options for the broker),
// KAFKA_START_TIMEOUT_MS (120000), JAVA_HOME (java to use), MVN (maven command, default `mvn`),
// KAFKA_HOME (where the broker's data, server.properties, log and pid file go: .tools/kafka; the
// jars stay in .tools/kafka/lib), KAFKA_KEEP_DATA (1: a data dir formatted before is kept, so a
// broker started again on it has its topics, offsets and transactions; default: formatted afresh),
// KAFKA_EXTRA_LISTENERS (e.g. "P0:41001:42001,P1:41002:42002": listener P0 on 127.0.0.1:41001 that
// advertises 127.0.0.1:42001, where a TCP proxy in front of it listens; the fault harness gives each
// controller its own proxied listener so that one controller's connection can be cut).
// A test that restarts a broker starts a private one with these (test/support/private-kafka.ts).
//
// Only node built-ins; plain ESM so that it runs before anything is compiled.
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
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
  tailOfFile,
  tailOfText,
  withDirLock,
} from "./local-process.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const toolDir = join(root, "tools", "kafka");
const pomFile = join(toolDir, "pom.xml");
const log4jFile = join(toolDir, "log4j2.properties");
const jarHome = join(root, ".tools", "kafka");
const home = process.env.KAFKA_HOME ? resolve(process.env.KAFKA_HOME) : jarHome;
const libDir = join(jarHome, "lib");
const stampFile = join(libDir, ".pom.sha256");
const dataDir = join(home, "data");
const propsFile = join(home, "server.properties");
const logFile = join(home, "kafka.log");
const pidFile = join(home, "kafka.pid");
const brokerPid = pidRecord(pidFile, "kafka.Kafka");
const lockDir = join(home, ".lock");

const HOST = "127.0.0.1";
const READY_MARKER = "Kafka Server started";
const DEFAULT_JAVA_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"];

const port = () => intEnv("KAFKA_PORT", 19092);
const controllerPort = () => intEnv("KAFKA_CONTROLLER_PORT", port() + 1);
const brokersString = () => `${HOST}:${port()}`;
const noop = async () => {};
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const { fail, say, intEnv, rel } = serviceTools("kafka");

function kafkaVersion() {
  const m = /<kafka\.version>\s*([^<\s]+)\s*<\/kafka\.version>/.exec(readFileSync(pomFile, "utf8"));
  return m?.[1] ?? "?";
}

function javaCommand() {
  return process.env.JAVA_HOME ? join(process.env.JAVA_HOME, "bin", "java") : "java";
}

const canConnect = (p, timeoutMs) => canConnectTo(HOST, p, timeoutMs);

/** SIGTERM this pid only, wait up to graceMs, then SIGKILL this pid only. */
function stopPid(pid, graceMs = 30_000) {
  return stopOwnPid(pid, { graceMs, pollMs: 100, say, fail });
}

/** Two callers never fetch, format or start at once. */
function withLock(fn) {
  return withDirLock(lockDir, { maxWaitMs: 10 * 60_000, pollMs: 200, fail, describe: rel }, fn);
}

function run(cmd, args, what) {
  const res = spawnSync(cmd, args, { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  const line = [cmd, ...args].map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(" ");
  if (res.error) {
    const hint = res.error.code === "ENOENT" ? ` (is \`${cmd}\` installed and on PATH?)` : "";
    throw fail(`${what} failed: cannot run ${cmd}: ${res.error.message}${hint}\n  command: ${line}`);
  }
  if (res.status !== 0) {
    const out = tailOfText(`${res.stdout ?? ""}\n${res.stderr ?? ""}`);
    throw fail(`${what} failed (exit ${res.status ?? res.signal})\n  command: ${line}\n  last lines of its output:\n${indent(out)}`);
  }
  return res.stdout;
}

/** Fetch the broker jars into .tools/kafka/lib unless the ones for this pom.xml are already there. */
function fetchJars() {
  const pomHash = createHash("sha256").update(readFileSync(pomFile)).digest("hex");
  if (existsSync(stampFile) && readFileSync(stampFile, "utf8").trim() === pomHash) return;
  say(`fetching Kafka ${kafkaVersion()} broker jars with Maven into ${rel(libDir)} (first use only)`);
  const tmp = `${libDir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  try {
    fetchInto(tmp, pomHash);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function fetchInto(tmp, pomHash) {
  run(
    process.env.MVN || "mvn",
    [
      "-B",
      "-q",
      "-f",
      pomFile,
      "org.apache.maven.plugins:maven-dependency-plugin:3.11.0:copy-dependencies",
      "-DincludeScope=runtime",
      `-DoutputDirectory=${tmp}`,
    ],
    "fetching the Kafka jars with Maven",
  );
  const jars = existsSync(tmp) ? readdirSync(tmp).filter((f) => f.endsWith(".jar")) : [];
  if (!jars.some((f) => f.startsWith("kafka_2.13-"))) {
    throw fail(`Maven finished but ${rel(tmp)} has no kafka_2.13 jar (found: ${jars.join(", ") || "nothing"})`);
  }
  writeFileSync(join(tmp, ".pom.sha256"), `${pomHash}\n`);
  rmSync(libDir, { recursive: true, force: true });
  renameSync(tmp, libDir);
}

function propsValue(v) {
  return String(v).replace(/\\/g, "\\\\");
}

/** KAFKA_EXTRA_LISTENERS as [{ name, port, advertisedPort }]. */
function extraListeners() {
  const raw = process.env.KAFKA_EXTRA_LISTENERS?.trim();
  if (!raw) return [];
  return raw.split(",").map((item) => {
    const m = /^([A-Z][A-Z0-9_]*):(\d{1,5}):(\d{1,5})$/.exec(item.trim());
    if (!m || m[1] === "PLAINTEXT" || m[1] === "CONTROLLER") {
      throw fail(
        `KAFKA_EXTRA_LISTENERS: ${JSON.stringify(item)} is not NAME:port:advertisedPort with an upper-case NAME ` +
          `other than PLAINTEXT and CONTROLLER (e.g. "P0:41001:42001")`,
      );
    }
    return { name: m[1], port: Number(m[2]), advertisedPort: Number(m[3]) };
  });
}

function writeServerProperties() {
  const p = port();
  const c = controllerPort();
  const extra = extraListeners();
  const props = {
    "process.roles": "broker,controller",
    "node.id": 1,
    "controller.quorum.voters": `1@${HOST}:${c}`,
    listeners: [`PLAINTEXT://${HOST}:${p}`, `CONTROLLER://${HOST}:${c}`, ...extra.map((l) => `${l.name}://${HOST}:${l.port}`)].join(","),
    "advertised.listeners": [`PLAINTEXT://${HOST}:${p}`, ...extra.map((l) => `${l.name}://${HOST}:${l.advertisedPort}`)].join(","),
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", ...extra.map((l) => `${l.name}:PLAINTEXT`)].join(","),
    "log.dirs": dataDir,
    // light for a 2-core machine and quick for tests
    "num.network.threads": 2,
    "num.io.threads": 2,
    "background.threads": 2,
    "num.partitions": 1,
    "num.recovery.threads.per.data.dir": 1,
    "log.cleaner.threads": 1,
    "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    "auto.create.topics.enable": false,
  };
  const text =
    "# Written by scripts/kafka.mjs on every start; edit that file, not this one.\n" +
    Object.entries(props)
      .map(([k, v]) => `${k}=${propsValue(v)}`)
      .join("\n") +
    "\n";
  writeFileSync(propsFile, text);
}

/** KAFKA_KEEP_DATA=1 and a data dir that StorageTool formatted before (it writes meta.properties). */
function keepsFormattedData() {
  return process.env.KAFKA_KEEP_DATA === "1" && existsSync(join(dataDir, "meta.properties"));
}

function formatStorage() {
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  // Kafka cluster ids are 16 random bytes, base64url without padding (22 chars). One starting with
  // "-" would be read as an option by StorageTool's argument parser (1 run in 64 failed to start),
  // so draw again, as Kafka's own Uuid.randomUuid() does.
  let clusterId = randomBytes(16).toString("base64url");
  while (clusterId.startsWith("-")) clusterId = randomBytes(16).toString("base64url");
  run(
    javaCommand(),
    [
      "-Xmx256m",
      "-XX:+UseSerialGC",
      "-XX:TieredStopAtLevel=1",
      `-Dlog4j2.configurationFile=${log4jFile}`,
      "-cp",
      join(libDir, "*"),
      "kafka.tools.StorageTool",
      "format",
      "-t",
      clusterId,
      "-c",
      propsFile,
    ],
    "formatting Kafka storage (kafka.tools.StorageTool format)",
  );
}

function javaOpts() {
  const raw = process.env.KAFKA_JAVA_OPTS;
  return raw && raw.trim() ? raw.trim().split(/\s+/) : DEFAULT_JAVA_OPTS;
}

function launchBroker() {
  return spawnService(javaCommand(), [...javaOpts(), `-Dlog4j2.configurationFile=${log4jFile}`, "-cp", join(libDir, "*"), "kafka.Kafka", propsFile], {
    cwd: home,
    logFile,
  });
}

/** The innermost "Caused by:" of the broker log, as a one-line summary (or ""). */
function rootCause() {
  try {
    const causes = readFileSync(logFile, "utf8").match(/^Caused by: .*$/gm);
    return causes ? `\n  cause: ${causes[causes.length - 1].slice("Caused by: ".length)}` : "";
  } catch {
    return "";
  }
}

async function waitUntilReady(pid, state, timeoutMs) {
  const started = Date.now();
  let marker = false;
  while (Date.now() - started < timeoutMs) {
    if (state.exited || !isAlive(pid)) {
      const how = earlyExitReason(state, javaCommand());
      throw fail(`Kafka broker ${how}${rootCause()}\n  log ${rel(logFile)}, last 40 lines:\n${indent(tailOfFile(logFile))}`);
    }
    if (!marker) {
      try {
        marker = readFileSync(logFile, "utf8").includes(READY_MARKER);
      } catch {
        // not written yet
      }
    }
    if (marker && (await canConnect(port()))) return Date.now() - started;
    await sleep(200);
  }
  throw fail(
    `Kafka broker pid ${pid} not ready after ${timeoutMs / 1000} s ` +
      `(ready marker "${READY_MARKER}" ${marker ? "seen" : "not seen"}, port ${port()} ${(await canConnect(port())) ? "open" : "closed"})\n` +
      `  log ${rel(logFile)}, last 40 lines:\n${indent(tailOfFile(logFile))}`,
  );
}

async function startBroker() {
  const t0 = Date.now();
  if (await canConnect(controllerPort())) {
    throw fail(
      `cannot start Kafka: controller port ${HOST}:${controllerPort()} is already in use by another process ` +
        `(set KAFKA_CONTROLLER_PORT, or KAFKA_PORT to move both)`,
    );
  }
  fetchJars();
  const tFetched = Date.now();
  mkdirSync(home, { recursive: true });
  writeServerProperties();
  const kept = keepsFormattedData();
  if (!kept) formatStorage();
  const tFormatted = Date.now();
  const { child, state } = launchBroker();
  const pid = child.pid;
  if (pid === undefined) {
    await sleep(50);
    throw fail(`could not start ${javaCommand()}: ${state.spawnError?.message ?? "no pid"}`);
  }
  brokerPid.write(pid);
  try {
    await waitUntilReady(pid, state, intEnv("KAFKA_START_TIMEOUT_MS", 120_000));
  } catch (err) {
    await stopPid(pid, 5_000).catch(() => {});
    brokerPid.remove(pid);
    throw err;
  }
  const secs = (ms) => (ms / 1000).toFixed(1);
  say(
    `Kafka ${kafkaVersion()} broker pid ${pid} ready on ${brokersString()} in ${secs(Date.now() - t0)} s ` +
      `(fetch ${secs(tFetched - t0)} s, ${kept ? "kept data" : "format"} ${secs(tFormatted - tFetched)} s, start ${secs(Date.now() - tFormatted)} s); log ${rel(logFile)}`,
  );
  return pid;
}

/**
 * A Kafka broker for the tests: KAFKA_BROKERS if set; else whatever listens on 127.0.0.1:KAFKA_PORT
 * (19092); else a fresh broker started here. `stop()` stops only a broker this call started.
 * A broker started here is also stopped if this process is interrupted (SIGINT, SIGTERM, SIGHUP)
 * or exits without calling stop(); `node scripts/kafka.mjs start` is what leaves one running.
 */
export async function ensureKafka() {
  return startOrReuse({ tiedToThisProcess: true });
}

async function startOrReuse({ tiedToThisProcess }) {
  const fromEnv = process.env.KAFKA_BROKERS;
  if (fromEnv && fromEnv.trim()) return { brokers: fromEnv.trim(), stop: noop };
  return withLock(async () => {
    const brokers = brokersString();
    if (await canConnect(port())) return { brokers, stop: noop };
    // A recorded broker that is alive but does not answer is stopping (or starting outside the
    // lock): give it a while to do either before deciding.
    const starting = brokerPid.read();
    if (starting !== undefined) {
      for (let i = 0; i < 175 && isAlive(starting); i++) {
        if (await canConnect(port())) return { brokers, stop: noop };
        await sleep(200);
      }
    }
    if (starting !== undefined && isAlive(starting)) {
      throw fail(
        `a Kafka broker (pid ${starting}, from ${rel(pidFile)}) is running but ${brokers} does not answer; ` +
          `stop it with \`node scripts/kafka.mjs stop\` (log: ${rel(logFile)})`,
      );
    }
    const pid = await startBroker();
    const stop = ownedServiceStop(pid, { stopPid, record: brokerPid, tied: tiedToThisProcess, say, what: "broker" });
    return { brokers, stop };
  });
}

async function cli(command) {
  switch (command) {
    case "start": {
      const kafka = await startOrReuse({ tiedToThisProcess: false });
      process.stdout.write(`${kafka.brokers}\n`);
      return 0;
    }
    case "stop":
      return stopRecorded(brokerPid, { stopPid, say, what: "broker" });
    case "status": {
      const pid = brokerPid.read();
      const open = await canConnect(port());
      const who = pid === undefined ? `no broker recorded in ${rel(pidFile)}` : `broker pid ${pid}`;
      say(`${who}; ${brokersString()} ${open ? "answers" : "does not answer"}`);
      return open ? 0 : 1;
    }
    default:
      process.stderr.write("usage: node scripts/kafka.mjs start|stop|status\n");
      return 2;
  }
}

runAsProgram(import.meta.url, "kafka", cli);
