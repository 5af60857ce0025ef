// Group 5: the controller at scale, in its own process with --expose-gc so that memory is read
// after a full collection. 10,000 clients each holding a waiting request (against bare grpc-js
// holding the same calls unanswered: the transport's own share), and 1,000 throttlers (against one).
import { systemClock } from "@sluice/core";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { BenchChild, type ChildEvent } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup, GroupContext } from "../lib/group.ts";
import { closedLoopLoad, sleep } from "../lib/grpc-load.ts";
import { controllerSpec } from "../lib/specs.ts";

const HOLD = "bare grpc-js holding the calls";
const ONE = "controller with 1 throttler";
const CALLS_PER_CHANNEL = 1000;

export const scale: BenchGroup = {
  id: "scale",
  title: "5. Scale: controller memory and CPU with 10,000 waiting clients and with 1,000 throttlers",
  async run(g) {
    await g.inTurn([() => measureWaiting(g), () => measureThrottlers(g)]);
  },
};

interface WaitingRun {
  readonly heapPerRequestBytes: number;
  readonly rssMiB: number;
  readonly admitCpuUsPerRequest: number;
  readonly idleCpuShare: number;
  readonly drainMs: number;
  readonly drainCpuUsPerRequest: number;
}

async function measureWaiting(g: GroupContext): Promise<void> {
  const reps = g.pick(3, 1);
  const clients = g.pick(10_000, 1_000);
  const idleMs = g.pick(3000, 300);
  const runs = new Map<string, WaitingRun[]>();
  g.log(`waiting: ${reps} runs of ${clients.toLocaleString("en-US")} clients each holding one RequestQuota`);
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of rep % 2 === 0 ? ["Sluice", HOLD] : [HOLD, "Sluice"]) {
      const run = await holdWaiting(subject === "Sluice", clients, idleMs);
      runs.set(subject, [...(runs.get(subject) ?? []), run]);
      g.log(
        `run ${rep + 1} ${subject}: ${formatNumber(run.heapPerRequestBytes)} B heap per waiting request, RSS ${formatNumber(run.rssMiB)} MiB, ` +
          `admit ${formatNumber(run.admitCpuUsPerRequest)} µs CPU each, idle ${formatNumber(run.idleCpuShare * 100)} % CPU, drain ${formatNumber(run.drainMs)} ms`,
      );
    }
  }
  const of = (subject: string, pick: (run: WaitingRun) => number) => (runs.get(subject) ?? []).map(pick);
  const label = `${clients.toLocaleString("en-US")} clients each holding a waiting request`;
  const figure = (id: string, what: string, unit: string, pick: (run: WaitingRun) => number, note?: string) =>
    g.add({
      id: `scale.waiting.${id}`,
      label: `${what}, ${label}`,
      unit,
      better: "lower",
      sluice: of("Sluice", pick),
      peers: { [HOLD]: of(HOLD, pick) },
      ...(note ? { note } : {}),
    });
  figure(
    "heap",
    "controller heap per waiting request",
    "bytes",
    (r) => r.heapPerRequestBytes,
    "heap used after a full GC, holding minus before, ÷ requests; each request has a 120 s deadline and its own client id; one gRPC channel per 1,000 calls",
  );
  figure("rss", "controller RSS", "MiB", (r) => r.rssMiB);
  figure("admit_cpu", "controller CPU to admit one request", "µs", (r) => r.admitCpuUsPerRequest);
  figure(
    "idle_cpu",
    "controller CPU while they wait",
    "% of a core",
    (r) => r.idleCpuShare * 100,
    "nothing polls: the controller sleeps until a grant, deadline or request is due; read from 0.5 s after a full GC for the idle window",
  );
  figure(
    "drain",
    "time to answer all once the limit is lifted",
    "ms",
    (r) => r.drainMs,
    "Sluice: UpdateDynamicSpec from limit 0 to unlimited; bare grpc-js: answer every held call; until the last caller has its answer",
  );
  figure("drain_cpu", "controller CPU per request answered when the limit is lifted", "µs", (r) => r.drainCpuUsPerRequest);
}

async function holdWaiting(sluice: boolean, clients: number, idleMs: number): Promise<WaitingRun> {
  const child = sluice
    ? BenchChild.start(
        "controller-process.ts",
        { mode: "sluice", spec: controllerSpec({ held: { limit: 0, max_queue_size: clients * 2 } }) },
        { nodeArgs: ["--expose-gc"] },
      )
    : BenchChild.start("controller-process.ts", { mode: "grpc-hold" }, { nodeArgs: ["--expose-gc"] });
  const channels: QuotaServiceClient[] = [];
  try {
    const address = String((await child.waitForType("ready", 30_000))["address"]);
    for (let i = 0; i < Math.ceil(clients / CALLS_PER_CHANNEL); i++) channels.push(createGrpcQuotaClient(address));
    // One call first on each channel, so that connecting is not counted as admission.
    await Promise.all(channels.map((channel) => channel.describeThrottlers().catch(() => undefined)));
    const base = await usage(child, true);
    const deadlineAt = systemClock.now() + 120_000;
    const calls = Array.from({ length: clients }, (_, i) =>
      (channels[Math.floor(i / CALLS_PER_CHANNEL)] as QuotaServiceClient).requestQuota(
        { throttlerId: "held", clientId: `client-${i}`, amount: 1, timestampMs: 1_700_000_000_000 + i, quotaClassId: "", requestId: `r-${i}` },
        { deadlineAt },
      ),
    );
    for (const call of calls) call.catch(() => undefined);
    for (let waited = 0; (await waitingCount(child, sluice)) < clients; waited += 50) {
      if (waited > 120_000) throw new Error(`only ${await waitingCount(child, sluice)} of ${clients} requests arrived`);
      await sleep(50);
    }
    const holding = await usage(child, true);
    // The idle window starts once the collector's background threads are done with the forced GC.
    await sleep(500);
    const quiet = await usage(child, false);
    await sleep(idleMs);
    const idle = await usage(child, false);
    const releasedAt = performance.now();
    if (sluice) child.send({ type: "update", dynamicSpecJson: JSON.stringify({ throttlers: { held: { max_queue_size: clients * 2 } }, computations: {} }) });
    else child.send({ type: "release" });
    await Promise.all(calls);
    const drainMs = performance.now() - releasedAt;
    const drained = await usage(child, false);
    return {
      heapPerRequestBytes: (Number(holding["heapUsedBytes"]) - Number(base["heapUsedBytes"])) / clients,
      rssMiB: Number(holding["rssBytes"]) / 2 ** 20,
      admitCpuUsPerRequest: ((Number(holding["cpuMs"]) - Number(base["cpuMs"])) * 1000) / clients,
      idleCpuShare: (Number(idle["cpuMs"]) - Number(quiet["cpuMs"])) / (Number(idle["at"]) - Number(quiet["at"])),
      drainMs,
      drainCpuUsPerRequest: ((Number(drained["cpuMs"]) - Number(idle["cpuMs"])) * 1000) / clients,
    };
  } finally {
    for (const channel of channels) channel.close();
    await child.stop();
  }
}

async function waitingCount(child: BenchChild, sluice: boolean): Promise<number> {
  if (!sluice) return Number((await child.request({ type: "held" }))["count"]);
  const snapshot = JSON.parse(String((await child.request({ type: "describe" }))["snapshotJson"])) as { throttlers: { pendingRequests: number }[] };
  return snapshot.throttlers.reduce((sum, t) => sum + t.pendingRequests, 0);
}

function usage(child: BenchChild, collect: boolean): Promise<ChildEvent> {
  return child.request({ type: "usage", collect });
}

interface ThrottlersRun {
  readonly heapMiB: number;
  readonly rssMiB: number;
  readonly idleCpuShare: number;
  readonly grantsPerCpuS: number;
  readonly describeMs: number;
}

async function measureThrottlers(g: GroupContext): Promise<void> {
  const reps = g.pick(3, 1);
  const count = g.pick(1000, 100);
  const idleMs = g.pick(3000, 300);
  const windowMs = g.pick(2500, 100);
  const runs = new Map<string, ThrottlersRun[]>();
  g.log(`throttlers: ${reps} runs, a controller with ${count} throttlers against one with 1`);
  for (let rep = 0; rep < reps; rep++) {
    for (const [subject, n] of rep % 2 === 0
      ? ([
          ["Sluice", count],
          [ONE, 1],
        ] as const)
      : ([
          [ONE, 1],
          ["Sluice", count],
        ] as const)) {
      const run = await throttlersRun(n, idleMs, windowMs, g.quick);
      runs.set(subject, [...(runs.get(subject) ?? []), run]);
      g.log(
        `run ${rep + 1} ${n} throttlers: heap ${formatNumber(run.heapMiB)} MiB, RSS ${formatNumber(run.rssMiB)} MiB, idle ${formatNumber(run.idleCpuShare * 100)} % CPU, ` +
          `${formatNumber(run.grantsPerCpuS)} grants per CPU-second over all throttlers, describe ${formatNumber(run.describeMs)} ms`,
      );
    }
  }
  const of = (subject: string, pick: (run: ThrottlersRun) => number) => (runs.get(subject) ?? []).map(pick);
  const label = `${count.toLocaleString("en-US")} throttlers`;
  const figure = (id: string, what: string, unit: string, better: "lower" | "higher", pick: (run: ThrottlersRun) => number, note?: string) =>
    g.add({
      id: `scale.throttlers.${id}`,
      label: `${what}, ${label}`,
      unit,
      better,
      sluice: of("Sluice", pick),
      peers: { [ONE]: of(ONE, pick) },
      ...(note ? { note } : {}),
    });
  figure("heap", "controller heap after start", "MiB", "lower", (r) => r.heapMiB, "after a full GC, no traffic yet");
  figure("rss", "controller RSS after start", "MiB", "lower", (r) => r.rssMiB);
  figure(
    "idle_cpu",
    "controller CPU with no traffic",
    "% of a core",
    "lower",
    (r) => r.idleCpuShare * 100,
    "the controller samples every throttler's counters every 250 ms for its granted-rate windows",
  );
  figure(
    "throughput",
    "grants per controller CPU-second, 16 clients spread over all throttlers",
    "grants/CPU-s",
    "higher",
    (r) => r.grantsPerCpuS,
    "closed-loop RequestQuota, each call to a random throttler (unlimited)",
  );
  figure("describe", "DescribeThrottlers (snapshot of every throttler as JSON)", "ms", "lower", (r) => r.describeMs);
}

async function throttlersRun(count: number, idleMs: number, windowMs: number, gated: boolean): Promise<ThrottlersRun> {
  const throttlers = Object.fromEntries(Array.from({ length: count }, (_, i) => [`t${i}`, {}]));
  const child = BenchChild.start("controller-process.ts", { mode: "sluice", spec: controllerSpec(throttlers) }, { nodeArgs: ["--expose-gc"] });
  try {
    const address = String((await child.waitForType("ready", 60_000))["address"]);
    await sleep(500);
    const start = await usage(child, true);
    await sleep(500);
    const quiet = await usage(child, false);
    await sleep(idleMs);
    const idle = await usage(child, false);
    const describeStarted = performance.now();
    await child.request({ type: "describe" });
    const describeMs = performance.now() - describeStarted;
    let before: ChildEvent | null = null;
    let after: ChildEvent | null = null;
    const load = await closedLoopLoad({
      address,
      throttlerId: "t0",
      clients: 16,
      warmupMs: Math.min(500, windowMs),
      windowMs,
      pickThrottler: () => `t${Math.floor(Math.random() * count)}`,
      gated,
      onWindow: async (edge) => {
        const reading = await usage(child, false);
        if (edge === "start") before = reading;
        else after = reading;
      },
    });
    const cpuMs = Number((after as ChildEvent | null)?.["cpuMs"]) - Number((before as ChildEvent | null)?.["cpuMs"]);
    const wallMs = Number((after as ChildEvent | null)?.["at"]) - Number((before as ChildEvent | null)?.["at"]);
    return {
      heapMiB: Number(start["heapUsedBytes"]) / 2 ** 20,
      rssMiB: Number(start["rssBytes"]) / 2 ** 20,
      idleCpuShare: (Number(idle["cpuMs"]) - Number(quiet["cpuMs"])) / (Number(idle["at"]) - Number(quiet["at"])),
      grantsPerCpuS: (load.calls * 1000) / load.windowMs / (cpuMs / wallMs),
      describeMs,
    };
  } finally {
    await child.stop();
  }
}
