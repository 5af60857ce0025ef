// RequestQuota over loopback gRPC: the controller in a child process, the load in two more (never
// in the bench process, never sharing an event loop or CPU accounting with the server). Against the
// same proto served by bare grpc-js (the transport's floor), run for run. Closed loop first (N
// callers, each sending when answered) for capacity; then open loop (a fixed arrival rate, half of
// the capacity just measured) for latency, so that p99 describes the server and not a saturated
// generator.
import { BenchChild, type ChildEvent } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";
import { CALLERS_PER_CHANNEL } from "../lib/grpc-load.ts";
import { controllerSpec } from "../lib/specs.ts";
import { median, percentiles } from "../lib/stats.ts";
import type { LoadRun } from "../children/quota-load-process.ts";
import { snapshot, windowShares, type Snapshot } from "../lib/cpu-accounting.ts";
import { availableParallelism } from "node:os";

const LEVELS = [1, 16, 256] as const;
const ECHO = "bare grpc-js echo (same proto)";
/** Load generator processes; a level below this many callers uses fewer. */
const GENERATORS = 2;
/** Issue #14's goal for the controller's own cost. */
const GRANTS_PER_CPU_S_GOAL = 100_000;

export interface Sample {
  readonly grantsPerS: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Share of one core the server process used during the window. */
  readonly serverCpu: number;
  /** grants/s ÷ serverCpu: what one fully busy core would serve at this load. */
  readonly grantsPerCpuS: number;
  /** Open loop: p99 of how late the generators sent after the planned time. */
  readonly lagP99Ms: number;
  /** Timed runs: p99 of the controller's own time per RequestQuota (handler called → answer written). */
  readonly controllerP99Ms?: number;
  readonly controllerP50Ms?: number;
  /** Timed runs: the longest event-loop delay, the longest GC pause, and GC's share of the window's wall time. */
  readonly controllerLoopDelayMaxMs?: number;
  readonly controllerGcMaxMs?: number;
  readonly controllerGcShare?: number;
  /** Timed runs: p99 of the controller's event-loop delay (how long an arrived frame waited to be read). */
  readonly controllerLoopDelayP99Ms?: number;
  /**
   * Who used the cores in the window (Linux's per-thread accounting, read by the bench process): the
   * machine busy, the server process, the generators together, everything else (other work on the
   * machine, the bench process); in cores.
   */
  readonly machineBusyCores: number;
  readonly serverCores: number;
  readonly generatorCores: number;
  readonly otherCores: number;
  /** ms per second the server's main thread (its event loop) was runnable but had no CPU. */
  readonly serverRunQueueMsPerS: number;
  /** The same for the generators' main threads (their mean). */
  readonly generatorRunQueueMsPerS: number;
}

export interface Server {
  readonly name: string;
  readonly child: BenchChild;
  readonly address: string;
}

export async function measureControllerThroughput(g: GroupContext): Promise<void> {
  const reps = g.pick(3, 1);
  const warmupMs = g.pick(700, 50);
  const windowMs = g.pick(2500, 100);
  const sluice = BenchChild.start("controller-process.ts", { mode: "sluice", spec: controllerSpec({ open: {} }), timing: true });
  const echo = BenchChild.start("controller-process.ts", { mode: "grpc-echo" });
  const generators = Array.from({ length: GENERATORS }, (_, i) => BenchChild.start("quota-load-process.ts", { name: `g${i}` }));
  try {
    const [sluiceReady, echoReady] = await Promise.all([
      sluice.waitForType("ready", 30_000),
      echo.waitForType("ready", 30_000),
      ...generators.map((child) => child.waitForType("ready", 30_000)),
    ]);
    const servers: Server[] = [
      { name: "Sluice", child: sluice, address: String(sluiceReady["address"]) },
      { name: ECHO, child: echo, address: String(echoReady["address"]) },
    ];
    const samples = new Map<string, Sample[]>();
    const record = (key: string, sample: Sample) => samples.set(key, [...(samples.get(key) ?? []), sample]);
    g.log(
      `${reps} runs × ${LEVELS.length} levels × 2 servers, closed loop from ${GENERATORS} load processes, ${windowMs} ms windows after ${warmupMs} ms warm-up`,
    );
    for (let rep = 0; rep < reps; rep++) {
      for (const clients of LEVELS) {
        for (const server of rep % 2 === 0 ? servers : [...servers].reverse()) {
          const sample = await measure(g, server, generators, { mode: "closed", clients, warmupMs, windowMs });
          record(`${server.name}@${clients}`, sample);
          g.log(
            `run ${rep + 1} ${server.name} ${clients} clients: ${formatNumber(sample.grantsPerS)} grants/s, p50 ${formatNumber(sample.p50Ms)} ms, p99 ${formatNumber(sample.p99Ms)} ms, server at ${formatNumber(sample.serverCpu * 100)} % of a core`,
          );
        }
      }
    }
    // Capacity: what the controller sustained with 256 callers, or what one core of it would serve,
    // whichever is lower (the generators share the 2 cores and may be the limit). Half of it is
    // offered to both servers at a fixed rate.
    const finite = (values: number[]) => values.filter((value) => Number.isFinite(value) && value > 0);
    const sustained = median(finite((samples.get("Sluice@256") ?? []).map((s) => s.grantsPerS)));
    const perCore = median(finite((samples.get("Sluice@256") ?? []).map((s) => s.grantsPerCpuS)));
    const capacity = Math.min(sustained, perCore);
    const openRate = Math.max(100, Math.round((Number.isFinite(capacity) ? capacity : 2_000) / 2));
    const openClients = 64;
    g.log(
      `open loop: ${formatNumber(openRate)} requests/s (half of ${formatNumber(capacity)}: min of ${formatNumber(sustained)} sustained and ${formatNumber(perCore)} per controller CPU-second), ${openClients} client ids`,
    );
    for (let rep = 0; rep < reps; rep++) {
      for (const server of rep % 2 === 0 ? servers : [...servers].reverse()) {
        const sample = await measure(g, server, generators, {
          mode: "open",
          clients: openClients,
          ratePerS: openRate,
          warmupMs,
          windowMs,
          timed: server.child === sluice,
        });
        record(`${server.name}@open`, sample);
        g.log(
          `run ${rep + 1} ${server.name} open loop at ${formatNumber(openRate)}/s: ${formatNumber(sample.grantsPerS)} answered/s, p50 ${formatNumber(sample.p50Ms)} ms, p99 ${formatNumber(sample.p99Ms)} ms (generator lag p99 ${formatNumber(sample.lagP99Ms)} ms${sample.controllerP99Ms !== undefined ? `; inside the controller p99 ${formatNumber(sample.controllerP99Ms)} ms, event-loop delay p99 ${formatNumber(sample.controllerLoopDelayP99Ms ?? NaN)} ms, longest GC pause ${formatNumber(sample.controllerGcMaxMs ?? NaN)} ms` : ""}), server at ${formatNumber(sample.serverCpu * 100)} % of a core; ${describeCores(sample)}`,
        );
      }
    }
    addFigures(g, samples, { openRate, capacity, openClients });
  } finally {
    await Promise.all([sluice.stop(), echo.stop(), ...generators.map((child) => child.stop())]);
  }
}

/** One timed run against one server: the generators start, measure and stop together (epoch schedule). */
export async function measure(
  g: GroupContext,
  server: Server,
  generators: readonly BenchChild[],
  plan: {
    readonly mode: "closed" | "open";
    readonly clients: number;
    readonly ratePerS?: number;
    readonly warmupMs: number;
    readonly windowMs: number;
    readonly transport?: "unary" | "stream" | "frames";
    /** transport "frames": calls per frame (quota-load-process.ts). */
    readonly callsPerFrame?: number;
    /** Also read the controller's own timing of each RequestQuota (a controller-process with `timing`). */
    readonly timed?: boolean;
    /** Default "open"; with `keys`, a keyed throttler whose keys the requests go round. */
    readonly throttlerId?: string;
    readonly keys?: number;
  },
): Promise<Sample> {
  const used = generators.slice(0, Math.max(1, Math.min(generators.length, plan.clients)));
  // A full run fixes the schedule in advance, with time for every generator to open and warm its
  // channels before the start. Quick mode shares the cores with the whole suite, where warming up
  // can outlast any such margin and a window can end between two answers: its load starts at
  // once, the window opens once every generator has had a call answered, and it closes once each
  // has counted one (`gated`; at least windowMs, and its rate is over its actual length).
  const gated = g.quick;
  const startAt = Date.now() + (gated ? 0 : 1_000);
  let windowFrom = startAt + plan.warmupMs;
  let windowTo = windowFrom + plan.windowMs;
  let stopAt = windowTo + 50;
  const seen = used.map((child) => child.events.length);
  used.forEach((child, i) => {
    const run: LoadRun = {
      address: server.address,
      throttlerId: plan.throttlerId ?? "open",
      ...(plan.keys ? { keys: plan.keys } : {}),
      mode: plan.mode,
      ...(plan.transport ? { transport: plan.transport } : {}),
      ...(plan.callsPerFrame ? { callsPerFrame: plan.callsPerFrame } : {}),
      clients: Math.floor(plan.clients / used.length) + (i < plan.clients % used.length ? 1 : 0),
      ...(plan.ratePerS !== undefined ? { ratePerS: plan.ratePerS / used.length } : {}),
      startAt,
      windowFrom,
      windowTo,
      stopAt,
      ...(gated ? { gated } : {}),
    };
    child.send({ type: "run", run });
  });
  const everyGenerator = (type: string, what: string) =>
    Promise.all(used.map((child, i) => child.waitFor((event) => event.type === type && child.events.indexOf(event) >= (seen[i] ?? 0), 60_000, what)));
  if (gated) {
    await everyGenerator("loaded", `a first answered call of a ${plan.mode}-loop run`);
    windowFrom = Date.now() + plan.warmupMs;
    for (const child of used) child.send({ type: "window", windowFrom });
  }
  const usage = (at: number) =>
    new Promise<ChildEvent>((resolve, reject) => setTimeout(() => server.child.request({ type: "usage" }).then(resolve, reject), Math.max(0, at - Date.now())));
  const at = (when: number, type: string) =>
    new Promise<ChildEvent>((resolve, reject) => setTimeout(() => server.child.request({ type }).then(resolve, reject), Math.max(0, when - Date.now())));
  const pids = [server.child.pid, ...used.map((child) => child.pid)];
  const accounted = (when: number) => new Promise<Snapshot>((resolve) => setTimeout(() => resolve(snapshot(pids)), Math.max(0, when - Date.now())));
  const timingReset = plan.timed ? at(windowFrom, "timing-reset") : null;
  const opened = Promise.all([usage(windowFrom), accounted(windowFrom)]);
  if (gated) {
    await Promise.all([
      new Promise((resolve) => setTimeout(resolve, Math.max(0, windowFrom + plan.windowMs - Date.now()))),
      everyGenerator("counted", `a call counted in a ${plan.mode}-loop window`),
    ]);
    windowTo = Date.now();
    stopAt = windowTo + 50;
    for (const child of used) child.send({ type: "window", windowFrom, windowTo, stopAt });
  }
  const windowMs = windowTo - windowFrom;
  const results = used.map((child, i) =>
    child.waitFor(
      (event) => event.type === "result" && child.events.indexOf(event) >= (seen[i] ?? 0),
      60_000 + windowTo - Date.now(),
      `result of a ${plan.mode}-loop run`,
    ),
  );
  const timing = timingReset ? Promise.all([timingReset, at(windowTo, "timing")]) : null;
  const [[before, cpuBefore], after, cpuAfter] = await Promise.all([opened, usage(windowTo), accounted(windowTo)]);
  const shares = windowShares(cpuBefore, cpuAfter, availableParallelism());
  const coresOf = (pid: number) => shares.byPid.get(pid) ?? Number.NaN;
  const serverCores = coresOf(server.child.pid);
  const generatorCores = used.reduce((sum, child) => sum + coresOf(child.pid), 0);
  const generatorWaits = used.map((child) => shares.mainWaitMsPerSByPid.get(child.pid) ?? Number.NaN);
  const controllerTiming = timing ? (await timing)[1] : null;
  const outcomes = await Promise.all(results);
  const calls = outcomes.reduce((sum, o) => sum + Number(o["calls"]), 0);
  const errors = outcomes.reduce((sum, o) => sum + Number(o["errors"]), 0);
  if (errors > 0)
    g.note(
      `${server.name}, ${plan.mode} loop, ${plan.clients} clients: ${errors} failed calls (first: ${String(outcomes.find((o) => o["firstError"])?.["firstError"])})`,
    );
  const latencies = outcomes.flatMap((o) => o["latenciesMs"] as number[]);
  const lags = outcomes.flatMap((o) => o["lagsMs"] as number[]);
  const [p50 = NaN, p99 = NaN] = percentiles(latencies, [0.5, 0.99]);
  const [lagP99 = NaN] = percentiles(lags, [0.99]);
  const grantsPerS = (calls * 1000) / windowMs;
  const serverCpu = cpuShare(before, after);
  return {
    grantsPerS,
    p50Ms: p50,
    p99Ms: p99,
    serverCpu,
    grantsPerCpuS: grantsPerS / serverCpu,
    lagP99Ms: lagP99,
    machineBusyCores: shares.machineBusy,
    serverCores,
    generatorCores,
    otherCores: shares.machineBusy - serverCores - generatorCores,
    serverRunQueueMsPerS: shares.mainWaitMsPerSByPid.get(server.child.pid) ?? Number.NaN,
    generatorRunQueueMsPerS: generatorWaits.reduce((sum, wait) => sum + wait, 0) / Math.max(1, generatorWaits.length),
    ...(controllerTiming
      ? {
          controllerP50Ms: Number(controllerTiming["handlerP50Ms"]),
          controllerP99Ms: Number(controllerTiming["handlerP99Ms"]),
          controllerLoopDelayP99Ms: Number(controllerTiming["loopDelayP99Ms"]),
          controllerLoopDelayMaxMs: Number(controllerTiming["loopDelayMaxMs"]),
          controllerGcMaxMs: Number(controllerTiming["gcMaxMs"]),
          controllerGcShare: Number(controllerTiming["gcTotalMs"]) / windowMs,
        }
      : {}),
  };
}

function addFigures(
  g: GroupContext,
  samples: Map<string, Sample[]>,
  open: { readonly openRate: number; readonly capacity: number; readonly openClients: number },
): void {
  const runsOf = (name: string, level: number | "open", pick: (s: Sample) => number) => (samples.get(`${name}@${level}`) ?? []).map(pick);
  const published = {
    Gubernator: ">2,000 req/s per node in production (README)",
    Doorman: "design target ≥1,000 QPS per server (doc/design.md)",
  };
  const loadNote = `closed-loop callers in ${GENERATORS} load-generator processes (one gRPC channel per ${CALLERS_PER_CHANNEL} callers), unlimited throttler, amount 1, a new request id per call; the generators share the 2 cores with the server, so raw grants/s is often their limit, not the server's`;
  const figures = new Map<string, ReturnType<GroupContext["add"]>>();
  for (const clients of LEVELS) {
    const label = `${clients} concurrent ${clients === 1 ? "client" : "clients"}`;
    figures.set(
      `throughput@${clients}`,
      g.add({
        id: `controller.rpc.throughput.${clients}`,
        label: `RequestQuota grants/s, ${label}`,
        unit: "grants/s",
        better: "higher",
        sluice: runsOf("Sluice", clients, (s) => s.grantsPerS),
        peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.grantsPerS) },
        ...(clients === 256 ? { published } : {}),
        note: loadNote,
      }),
    );
    figures.set(
      `cpu@${clients}`,
      g.add({
        id: `controller.rpc.per_cpu_second.${clients}`,
        label: `grants per server CPU-second, ${label}`,
        unit: "grants/CPU-s",
        better: "higher",
        sluice: runsOf("Sluice", clients, (s) => s.grantsPerCpuS),
        peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.grantsPerCpuS) },
        note: "grants/s ÷ the server process's CPU time per second (user + system, all its threads): the rate one fully busy core would sustain",
      }),
    );
    g.add({
      id: `controller.rpc.p50.${clients}`,
      label: `RequestQuota p50 latency, closed loop, ${label}`,
      unit: "ms",
      better: "lower",
      sluice: runsOf("Sluice", clients, (s) => s.p50Ms),
      peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.p50Ms) },
    });
    g.add({
      id: `controller.rpc.p99.${clients}`,
      label: `RequestQuota p99 latency, closed loop, ${label}`,
      unit: "ms",
      better: "lower",
      sluice: runsOf("Sluice", clients, (s) => s.p99Ms),
      peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.p99Ms) },
      note: "measured at the caller: a closed loop saturates whichever side is slower, so this includes the generators' own queueing on the shared cores; the open-loop figures below are the latency goal's",
    });
  }
  const openLabel = `open loop at ${formatNumber(open.openRate)} requests/s (half of capacity)`;
  const openNote = `${GENERATORS} load-generator processes send at a fixed rate (request k at start + k ÷ rate, checked every 1 ms), ${open.openClients} client ids; each latency is timed from the planned send time, so a late send counts; the rate is half of the capacity measured above (${formatNumber(open.capacity)}: the lower of Sluice's sustained grants/s and its grants per CPU-second at 256 clients), offered to both servers`;
  const openP50 = g.add({
    id: "controller.rpc.open_loop.p50",
    label: `RequestQuota p50 latency, ${openLabel}`,
    unit: "ms",
    better: "lower",
    sluice: runsOf("Sluice", "open", (s) => s.p50Ms),
    peers: { [ECHO]: runsOf(ECHO, "open", (s) => s.p50Ms) },
    note: openNote,
  });
  const openP99 = g.add({
    id: "controller.rpc.open_loop.p99",
    label: `RequestQuota p99 latency, ${openLabel}`,
    unit: "ms",
    better: "lower",
    sluice: runsOf("Sluice", "open", (s) => s.p99Ms),
    peers: {
      [ECHO]: runsOf(ECHO, "open", (s) => s.p99Ms),
      "the generators' own send lag, p99": runsOf("Sluice", "open", (s) => s.lagP99Ms),
      "inside the controller: handler called → answered, p99": runsOf("Sluice", "open", (s) => s.controllerP99Ms ?? NaN),
      "inside the controller: event-loop delay, p99": runsOf("Sluice", "open", (s) => s.controllerLoopDelayP99Ms ?? NaN),
    },
  });
  g.add({
    id: "controller.rpc.open_loop.per_cpu_second",
    label: `grants per server CPU-second, ${openLabel}`,
    unit: "grants/CPU-s",
    better: "higher",
    sluice: runsOf("Sluice", "open", (s) => s.grantsPerCpuS),
    peers: { [ECHO]: runsOf(ECHO, "open", (s) => s.grantsPerCpuS) },
    note: "below saturation a server also pays per wake-up (fewer calls per event-loop turn), so this is lower than the closed-loop figure",
  });
  const perCpu = figures.get("cpu@256");
  const raw = figures.get("throughput@256");
  if (perCpu && raw) {
    g.goal({
      id: "controller.rpc.throughput",
      text: `≥ ${GRANTS_PER_CPU_S_GOAL.toLocaleString("en-US")} grants per controller CPU-second (256 clients, load in separate processes)`,
      figure: perCpu,
      value: perCpu.sluice?.median ?? null,
      target: GRANTS_PER_CPU_S_GOAL,
      compare: ">=",
      describe: `${formatNumber(perCpu.sluice?.median ?? NaN)} grants per controller CPU-second at 256 clients (bare grpc-js echo ${formatNumber(perCpu.peers[ECHO]?.value.median ?? NaN)}); raw ${formatNumber(raw.sluice?.median ?? NaN)} grants/s`,
    });
  }
  g.goal({
    id: "controller.rpc.p99",
    text: "p99 < 2 ms at half of capacity, open loop",
    figure: openP99,
    value: openP99.sluice?.median ?? null,
    target: 2,
    compare: "<",
    describe: `${formatNumber(openP99.sluice?.median ?? NaN)} ms at ${formatNumber(open.openRate)} requests/s (bare grpc-js echo ${formatNumber(openP99.peers[ECHO]?.value.median ?? NaN)} ms; p50 ${formatNumber(openP50.sluice?.median ?? NaN)} ms)`,
  });
}

/** Who had the 2 cores in the window, and how long each side's event loop waited for one. */
export function describeCores(sample: Sample): string {
  return (
    `cores busy ${formatNumber(sample.machineBusyCores)}: controller ${formatNumber(sample.serverCores)}, generators ${formatNumber(sample.generatorCores)}, ` +
    `others ${formatNumber(sample.otherCores)}; run-queue wait of the main thread: controller ${formatNumber(sample.serverRunQueueMsPerS)} ms/s, ` +
    `generators ${formatNumber(sample.generatorRunQueueMsPerS)} ms/s`
  );
}

export function cpuShare(before: ChildEvent | null, after: ChildEvent | null): number {
  if (!before || !after) return Number.NaN;
  const cpuMs = Number(after["cpuMs"]) - Number(before["cpuMs"]);
  const wallMs = Number(after["at"]) - Number(before["at"]);
  return wallMs > 0 ? cpuMs / wallMs : Number.NaN;
}
