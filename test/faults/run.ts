// `pnpm test:faults [--seed N] [--minutes M] [--faults kind,kind|none] [--load mixed|eight-concurrency]`:
// the fault harness (docs/design.md §5.3);
// `pnpm test:faults --check <run dir>` checks and reports a recorded history again.
// A seeded schedule of faults runs against a private broker, three controllers of one failover
// group behind Toxiproxy and two client processes under load; then the checker reads the whole
// history. Prints the seed first, the schedule, per fault the failover time and the over-grant,
// and a summary; exits 1 on any invariant violation (or a group that never recovered).
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { CHILD_NODE_FLAGS, ROOT } from "../support/processes.ts";
import { checkHistory } from "./checker.ts";
import { ensureDir, FaultCluster } from "./cluster.ts";
import { FAULT_KINDS, HistoryWriter, readHistory, type FaultKind, type ThrottlerInfo } from "./history.ts";
import type { LoadClientOptions } from "./load-client.ts";
import { monitor } from "./monitor.ts";
import { Nemesis, type FaultOutcome } from "./nemesis.ts";
import { livenessTailMs } from "./liveness.ts";
import { LEASE_TIMEOUT_MS, LOAD_SHAPES, loadShape, type LoadShapeName } from "./load-shapes.ts";
import { faultFigures, outcomesFromHistory, printReport } from "./report.ts";
import { describeStep, faultSchedule, SESSION_TIMEOUT_MS } from "./schedule.ts";

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    minutes: { type: "string", default: "3" },
    faults: { type: "string" },
    clients: { type: "string", default: "2" },
    load: { type: "string", default: "mixed" },
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
// --faults none: the load alone, for the whole run, under a failover group that nothing disturbs.
const noFaults = values.faults === "none";
const kinds = values.faults && !noFaults ? (values.faults.split(",").map((k) => k.trim()) as FaultKind[]) : undefined;
const usage = (why: string) => {
  process.stderr.write(
    `test:faults: ${why}\nusage: pnpm test:faults [--seed N] [--minutes M] [--faults ${FAULT_KINDS.join(",")}|none] [--clients N] ` +
      `[--load ${LOAD_SHAPES.join("|")}] | --check <run dir>\n`,
  );
  process.exit(2);
};
if (!Number.isInteger(seed) || seed < 0) usage(`--seed takes a whole number ≥ 0, got ${values.seed}`);
if (!(minutes > 0)) usage(`--minutes takes a number > 0, got ${values.minutes}`);
if (!(Number.isInteger(clientCount) && clientCount >= 2)) usage(`--clients takes a whole number ≥ 2, got ${values.clients}`);
for (const k of kinds ?? []) if (!FAULT_KINDS.includes(k)) usage(`unknown fault kind "${k}"`);
if (!(LOAD_SHAPES as readonly string[]).includes(values.load)) usage(`unknown load "${values.load}"`);
const shape = loadShape(values.load as LoadShapeName, clientCount);

const print = (line: string) => process.stdout.write(`${line}\n`);
const log = (line: string) => print(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
print(`seed ${seed}`);
print(
  `replay: pnpm test:faults --seed ${seed} --minutes ${minutes}${values.faults ? ` --faults ${values.faults}` : ""}${values.load !== "mixed" ? ` --load ${values.load}` : ""}`,
);
print(`load: ${shape.description}; ${clientCount} client processes`);
const steps = noFaults ? [] : faultSchedule({ seed, minutes, ...(kinds ? { kinds } : {}) });
print(`schedule (${steps.length} faults, every kind: ${FAULT_KINDS.every((k) => steps.some((s) => s.kind === k)) ? "yes" : "no"}):`);
steps.forEach((step, i) => print(`  ${describeStep(step, i)}`));

const pipeline = `faults-${seed}-${Date.now().toString(36)}`;
const runDir = ensureDir(resolve(values["run-dir"] ?? join(ROOT, "test/artifacts/faults", pipeline)));
print(`history and logs: ${runDir}`);

const throttlers = shape.throttlers;
const infos: ThrottlerInfo[] = shape.infos;

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
/** When the clients were told to stop: calls they abort from then on are not failures of the group. */
let loadEndedAt = Number.POSITIVE_INFINITY;
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
      callers: shape.callers,
      concurrencyIds: shape.concurrencyIds,
      deadlineMs: 10_000,
      holdMs: shape.holdMs,
      ...(shape.paceMs !== undefined ? { paceMs: shape.paceMs } : {}),
    };
    const child = spawn(process.execPath, ["--import", "tsx", ...CHILD_NODE_FLAGS, join(ROOT, "test/faults/load-client.ts"), JSON.stringify(options)], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
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
    {
      cluster,
      history,
      adaptiveIds: shape.adaptiveIds,
      reconfigured: (n) => ({ throttlers: throttlers(1000 + n), computations: {} }),
      pollMs: 500,
      reconfigureEveryMs: 7_000,
      log,
    },
    stopMonitor.signal,
  );
  const nemesis = new Nemesis(cluster, history, log);
  if (noFaults) await new Promise((r) => setTimeout(r, minutes * 60_000));
  for (const [i, step] of steps.entries()) {
    if (interrupted) break;
    await new Promise((r) => setTimeout(r, step.quietMs));
    const outcome = await nemesis.run(step, i);
    outcomes.push(outcome);
    if (outcome.failoverMs === null) unrecovered++;
  }
  // Long enough after the last fault for the checker to see the concurrency throttler grant again.
  if (!noFaults) await new Promise((r) => setTimeout(r, livenessTailMs(LEASE_TIMEOUT_MS)));
  stopMonitor.abort();
  await monitoring;
  loadEndedAt = Date.now();
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
const failed = events.filter((e) => e.type === "fail" && e.at < loadEndedAt).length;
if (shape.everyCallGranted) {
  // The load achieved, per throttler: its grants over the span from the first grant to the last.
  const rates = infos.map((info) => {
    const at = events.filter((e) => e.type === "grant" && e.throttler === info.id).map((e) => e.at);
    const spanS = at.length > 1 ? (Math.max(...at) - Math.min(...at)) / 1000 : 0;
    return spanS > 0 ? at.length / spanS : 0;
  });
  print(`load achieved: ${Math.min(...rates).toFixed(1)}–${Math.max(...rates).toFixed(1)} grants/s per throttler`);
  print(`every call granted: ${failed === 0 ? "yes" : `NO, ${failed} failed`} (load ${values.load})`);
}
const pass = result.violations.length === 0 && unrecovered === 0 && (!shape.everyCallGranted || failed === 0);
print(`seed ${seed}: ${pass ? "PASS" : "FAIL"}`);
process.exit(pass ? 0 : 1);
