// `pnpm test:faults [--seed N] [--minutes M] [--faults kind,kind]`: the fault harness (DESIGN §9.1);
// `pnpm test:faults --check <run dir>` checks and reports a recorded history again.
// A seeded schedule of faults runs against a private broker, three controllers of one failover
// group behind Toxiproxy and two client processes under load; then the checker reads the whole
// history. Prints the seed first, the schedule, per fault the failover time and the over-grant,
// and a summary; exits 1 on any invariant violation (or a group that never recovered).
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { ROOT } from "../support/processes.ts";
import { checkHistory } from "./checker.ts";
import { ensureDir, FaultCluster } from "./cluster.ts";
import { FAULT_KINDS, HistoryWriter, readHistory, type FaultKind, type ThrottlerInfo } from "./history.ts";
import type { LoadClientOptions } from "./load-client.ts";
import { monitor } from "./monitor.ts";
import { Nemesis, type FaultOutcome } from "./nemesis.ts";
import { livenessTailMs } from "./liveness.ts";
import { faultFigures, outcomesFromHistory, printReport } from "./report.ts";
import { describeStep, faultSchedule, SESSION_TIMEOUT_MS } from "./schedule.ts";

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    minutes: { type: "string", default: "3" },
    faults: { type: "string" },
    clients: { type: "string", default: "2" },
    "run-dir": { type: "string" },
    check: { type: "string" },
  },
});

// --check DIR: check and report a recorded history again (after a change to the checker), run nothing.
if (values.check !== undefined) {
  const events = readHistory(resolve(values.check));
  const setup = events.find((e) => e.type === "setup");
  const result = checkHistory(events);
  const outcomes = outcomesFromHistory(events);
  printReport(setup?.type === "setup" ? setup.seed : -1, faultFigures(events, outcomes), result, (line) => process.stdout.write(`${line}\n`));
  process.exit(result.violations.length === 0 && outcomes.every((o) => o.failoverMs !== null) ? 0 : 1);
}
const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
const minutes = Number(values.minutes);
const clientCount = Number(values.clients);
const kinds = values.faults ? (values.faults.split(",").map((k) => k.trim()) as FaultKind[]) : undefined;
const usage = (why: string) => {
  process.stderr.write(`test:faults: ${why}\nusage: pnpm test:faults [--seed N] [--minutes M] [--faults ${FAULT_KINDS.join(",")}] [--clients N] | --check <run dir>\n`);
  process.exit(2);
};
if (!Number.isInteger(seed) || seed < 0) usage(`--seed takes a whole number ≥ 0, got ${values.seed}`);
if (!(minutes > 0)) usage(`--minutes takes a number > 0, got ${values.minutes}`);
if (!(Number.isInteger(clientCount) && clientCount >= 2)) usage(`--clients takes a whole number ≥ 2, got ${values.clients}`);
for (const k of kinds ?? []) if (!FAULT_KINDS.includes(k)) usage(`unknown fault kind "${k}"`);

const print = (line: string) => process.stdout.write(`${line}\n`);
const log = (line: string) => print(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
print(`seed ${seed}`);
print(`replay: pnpm test:faults --seed ${seed} --minutes ${minutes}${values.faults ? ` --faults ${values.faults}` : ""}`);
const steps = faultSchedule({ seed, minutes, ...(kinds ? { kinds } : {}) });
print(`schedule (${steps.length} faults, every kind: ${FAULT_KINDS.every((k) => steps.some((s) => s.kind === k)) ? "yes" : "no"}):`);
steps.forEach((step, i) => print(`  ${describeStep(step, i)}`));

const pipeline = `faults-${seed}-${Date.now().toString(36)}`;
const runDir = ensureDir(resolve(values["run-dir"] ?? join(ROOT, "test/artifacts/faults", pipeline)));
print(`history and logs: ${runDir}`);

const LOAD_MODULE = join(ROOT, "test/faults/load-module.mjs");
/** The concurrency throttler's lease_timeout: short, so that its liveness after each fault is checked within a run. */
const LEASE_TIMEOUT_MS = 10_000;
const common = { request_period: "200ms", rpc_timeout: "2s" };
const throttlers = (maxQueueSize: number) => ({
  rate: { limit: 40, period: "1s", max_queue_size: maxQueueSize, ...common },
  slots: { kind: "concurrency", limit: 4, lease_timeout: `${LEASE_TIMEOUT_MS / 1000}s`, ...common },
  adaptive: {
    adaptive: { load: { module: LOAD_MODULE }, target: { low: 0.6, high: 0.8 }, initial_limit: 20, min_limit: 2, max_limit: 20, interval: "1s" },
    period: "1s",
    ...common,
  },
});
const infos: ThrottlerInfo[] = [
  { id: "rate", kind: "rate", limit: 40, periodMs: 1_000, smooth: false, requestPeriodMs: 200 },
  { id: "slots", kind: "concurrency", limit: 4, periodMs: 1_000, smooth: false, requestPeriodMs: 200, leaseTimeoutMs: LEASE_TIMEOUT_MS },
  { id: "adaptive", kind: "rate", limit: null, periodMs: 1_000, smooth: false, requestPeriodMs: 200, maxLimit: 20 },
];

const history = new HistoryWriter(join(runDir, "harness.jsonl"));
history.write({ type: "setup", at: Date.now(), seed, clients: clientCount, throttlers: infos });
const clients: ChildProcess[] = [];
let cluster: FaultCluster | undefined;
let interrupted = false;
const cleanup = async () => {
  for (const c of clients) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await cluster?.close().catch(() => {});
};
process.on("SIGINT", () => {
  interrupted = true;
  void cleanup().then(() => process.exit(130));
});

const outcomes: FaultOutcome[] = [];
let unrecovered = 0;
try {
  cluster = await FaultCluster.start({ runDir, pipeline, history, throttlers: throttlers(1000), sessionTimeout: `${SESSION_TIMEOUT_MS / 1000}s` });
  const first = await cluster.waitForLeader([], 120_000);
  if (!first) throw new Error("no controller served as leader within 120 s of starting (see controller-*.log)");
  log(`broker ${cluster.kafka.brokers[0]}; controllers ${cluster.addresses.join(", ")}; leader ${first.slot.address}`);

  for (let i = 0; i < clientCount; i++) {
    const options: LoadClientOptions = {
      controllers: cluster.addresses,
      clientId: `client-${i}`,
      historyFile: join(runDir, `client-${i}.jsonl`),
      seed: seed * 31 + i + 1,
      callers: { rate: 3, slots: 4, adaptive: 2 },
      concurrencyIds: ["slots"],
      deadlineMs: 10_000,
      holdMs: [20, 200],
    };
    const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "test/faults/load-client.ts"), JSON.stringify(options)], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    const out = createWriteStream(join(runDir, `client-${i}.log`));
    child.stdout.pipe(out);
    child.stderr.pipe(out);
    clients.push(child);
  }
  await Promise.all(
    clients.map(
      (c, i) =>
        new Promise<void>((ok, fail) => {
          let seen = "";
          c.stdout?.on("data", (chunk: Buffer) => {
            seen += chunk.toString();
            if (seen.includes("connected")) ok();
          });
          c.once("exit", (code) => fail(new Error(`client-${i} exited (${code}) before connecting (see client-${i}.log)`)));
        }),
    ),
  );
  log(`${clientCount} clients connected`);

  const stopMonitor = new AbortController();
  const monitoring = monitor(
    { cluster, history, adaptiveIds: ["adaptive"], reconfigured: (n) => ({ throttlers: throttlers(1000 + n), computations: {} }), pollMs: 500, reconfigureEveryMs: 7_000, log },
    stopMonitor.signal,
  );
  const nemesis = new Nemesis(cluster, history, log);
  for (const [i, step] of steps.entries()) {
    if (interrupted) break;
    await new Promise((r) => setTimeout(r, step.quietMs));
    const outcome = await nemesis.run(step, i);
    outcomes.push(outcome);
    if (outcome.failoverMs === null) unrecovered++;
  }
  // Long enough after the last fault for the checker to see the concurrency throttler grant again.
  await new Promise((r) => setTimeout(r, livenessTailMs(LEASE_TIMEOUT_MS)));
  stopMonitor.abort();
  await monitoring;
  await Promise.all(
    clients.map((c) => {
      const exited = new Promise((r) => c.once("exit", r));
      c.kill("SIGTERM");
      return Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
    }),
  );
} catch (error) {
  print(`harness error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  history.close();
  await cleanup();
  process.exit(3);
}
history.close();
await cleanup();

const events = readHistory(runDir);
const result = checkHistory(events);
printReport(seed, faultFigures(events, outcomesFromHistory(events)), result, print);
if (unrecovered > 0) print(`${unrecovered} fault(s) after which no controller served as leader within 90 s`);
print(`seed ${seed}: ${result.violations.length === 0 && unrecovered === 0 ? "PASS" : "FAIL"}`);
process.exit(result.violations.length === 0 && unrecovered === 0 ? 0 : 1);
