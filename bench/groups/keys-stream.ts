// Group 9, over the wire: (b) key-grants per controller CPU-second with 10,000 active keys, the load
// from two generator processes, each a worker with ONE QuotaStream carrying frames of many keys'
// calls (docs/design.md §11.4: a worker's refills for all its keys travel together on its stream),
// against an unkeyed throttler on the same controller in the same runs and rate-limiter-flexible's
// consume() in this process (no RPC at all); (c) how many QuotaStream frames a client using 10,000
// keys sends per request_period.
import { RateLimiterMemory } from "rate-limiter-flexible";
import { BenchChild } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";
import { controllerSpec } from "../lib/specs.ts";
import { measure, type Sample, type Server } from "./controller-throughput.ts";

const KEYED = "Sluice, keyed throttler";
const UNKEYED = "Sluice, one unkeyed throttler of the same limit (same controller, same runs)";
const RLF = "rate-limiter-flexible consume(), in process (no RPC)";
const KEY_GRANTS_GOAL = 200_000;
/** (b): RequestQuota calls per frame, and calls open at most per worker (frames of them in flight). */
const CALLS_PER_FRAME = 256;
const OPEN_CALLS_PER_WORKER = 1_024;

/**
 * Every count and duration of (b) and (c), full run and quick (CI's smoke) side by side: the one
 * place to change this group's sizing.
 */
function sizing(g: GroupContext) {
  return {
    /** (b): workers, one generator process and one QuotaStream each. */
    workers: g.pick(2, 1),
    keyGrantRuns: g.pick(3, 1),
    keys: g.pick(10_000, 1_000),
    /** (b): quick windows are gated by measure(): warm-up after each worker's first answer, and a
     * window of at least this long that closes only once each worker counted a grant. */
    keyGrantWarmupMs: g.pick(1_000, 50),
    keyGrantWindowMs: g.pick(2_500, 100),
    /** (b): one unrecorded keyed run first, so that every key exists before the runs (0: none). */
    primingWindowMs: g.pick(1_000, 0),
    /** (c) */
    frameKeys: g.pick(10_000, 500),
    framesWarmupMs: g.pick(4_000, 1_500),
    framesWindowMs: g.pick(6_000, 1_000),
  };
}
const REQUEST_PERIOD_MS = 1_000;
/** Each key's limit in the frames run (c). */
const FRAMES_KEY_LIMIT = 2;

/**
 * (b) and (c) on one controller process: its throttlers `per_key` (a limit per key that never binds:
 * the figure is the controller's cost per grant of a key's bucket), `one` (unkeyed, the same limit) and
 * `per_customer` (the frames run's). Every child starts at once, so their start-ups overlap.
 */
export async function measureOverStream(g: GroupContext): Promise<void> {
  const { frameKeys, workers: generatorCount } = sizing(g);
  const spec = controllerSpec({
    per_key: { limit: 1_000_000, keyed: { max_keys: 100_000 } },
    one: { limit: 1_000_000 },
    per_customer: { limit: FRAMES_KEY_LIMIT, period: "1s", request_period: `${REQUEST_PERIOD_MS}ms`, keyed: { max_keys: 100_000 } },
  });
  const controller = BenchChild.start("controller-process.ts", { mode: "sluice", spec });
  const generators = Array.from({ length: generatorCount }, (_, i) => BenchChild.start("quota-load-process.ts", { name: `k${i}` }));
  let client: BenchChild | null = null;
  try {
    const address = String((await controller.waitForType("ready", 30_000))["address"]);
    client = BenchChild.start("keyed-client-process.ts", { address, throttlerId: "per_customer", keys: frameKeys });
    await Promise.all(generators.map((child) => child.waitForType("ready", 30_000)));
    await measureKeyGrants(g, { name: "Sluice", child: controller, address }, generators);
    await measureKeyFrames(g, client, frameKeys);
  } finally {
    await Promise.all([controller.stop(), ...generators.map((child) => child.stop()), client?.stop()]);
  }
}

async function measureKeyGrants(g: GroupContext, server: Server, generators: readonly BenchChild[]): Promise<void> {
  const { keyGrantRuns: reps, keys, keyGrantWarmupMs: warmupMs, keyGrantWindowMs: windowMs, primingWindowMs } = sizing(g);
  const controller = server.child;
  const openCalls = OPEN_CALLS_PER_WORKER * generators.length;
  const samples: Record<string, Sample[]> = { [KEYED]: [], [UNKEYED]: [] };
  const rlf: number[] = [];
  g.log(
    `key-grants: ${reps} runs, ${keys.toLocaleString("en-US")} keys, ${generators.length} workers with a QuotaStream each, frames of ${CALLS_PER_FRAME} calls, ${OPEN_CALLS_PER_WORKER} open per worker, ${windowMs} ms windows`,
  );
  // The figure is for keys that exist: their first requests (a bucket made per key) go in a run of
  // their own, not in the first measured one.
  if (primingWindowMs > 0) {
    const plan = {
      mode: "closed" as const,
      clients: openCalls,
      warmupMs,
      windowMs: primingWindowMs,
      transport: "frames" as const,
      callsPerFrame: CALLS_PER_FRAME,
    };
    const primed = await measure(g, server, generators, { ...plan, throttlerId: "per_key", keys });
    g.log(`priming run (not counted): ${formatNumber(primed.grantsPerS)} key-grants/s, every key asked for`);
  }
  for (let rep = 0; rep < reps; rep++) {
    const order = rep % 2 === 0 ? [KEYED, UNKEYED] : [UNKEYED, KEYED];
    for (const subject of order) {
      const keyed = subject === KEYED;
      const sample = await measure(g, server, generators, {
        mode: "closed",
        clients: openCalls,
        warmupMs,
        windowMs,
        transport: "frames",
        callsPerFrame: CALLS_PER_FRAME,
        throttlerId: keyed ? "per_key" : "one",
        ...(keyed ? { keys } : {}),
      });
      samples[subject]?.push(sample);
      g.log(
        `run ${rep + 1} ${subject}: ${formatNumber(sample.grantsPerS)} grants/s, controller at ${formatNumber(sample.serverCpu * 100)} % of a core → ${formatNumber(sample.grantsPerCpuS)} grants/CPU-s`,
      );
    }
    rlf.push(await rateLimiterFlexiblePerCpuSecond(keys, windowMs));
    g.log(`run ${rep + 1} ${RLF}: ${formatNumber(rlf[rlf.length - 1] ?? NaN)} consumes/CPU-s`);
  }
  const described = JSON.parse(String((await controller.request({ type: "describe" }))["snapshotJson"])) as {
    throttlers: { id: string; keyed?: { keys: number; activeKeys: number } }[];
  };
  const live = described.throttlers.find((t) => t.id === "per_key")?.keyed;
  g.log(`the controller holds ${live?.keys ?? "?"} keys of per_key (${live?.activeKeys ?? "?"} with a bucket)`);
  const of = (subject: string, pick: (s: Sample) => number) => (samples[subject] ?? []).map(pick);
  const label = `${keys.toLocaleString("en-US")} active keys, ${generators.length} ${generators.length === 1 ? "worker's QuotaStream" : "workers' QuotaStreams"} (frames of ${CALLS_PER_FRAME} calls)`;
  const perCpu = g.add({
    id: "keys.rpc.per_cpu_second",
    label: `key-grants per controller CPU-second, ${label}`,
    unit: "grants/CPU-s",
    better: "higher",
    sluice: of(KEYED, (s) => s.grantsPerCpuS),
    peers: { [UNKEYED]: of(UNKEYED, (s) => s.grantsPerCpuS), [RLF]: rlf },
    published: {
      Gubernator:
        '">2,000 requests a second" per node in production, "most batched responses returned in under 1 millisecond" (README); no figure per CPU-second',
    },
    note:
      `grants/s ÷ the controller process's CPU time per second (user + system, GC threads included). Each load process is a worker with one QuotaStream (bench/lib/frame-load.ts): frames of ${CALLS_PER_FRAME} RequestQuota calls encoded by the protocol's own serializer, each call as a refill sends it (the worker's client id, a fresh UUID request id, a 30 s deadline, its key), a new frame whenever a frame's worth is answered, ${OPEN_CALLS_PER_WORKER.toLocaleString("en-US")} calls open per worker; the calls go round all the keys (every key active, each made by an unrecorded priming run first); a limit per key of 1,000,000/s, so nothing waits. ` +
      "rate-limiter-flexible runs in the bench process with no network: its figure is the cost of the decision alone, not a service",
  });
  g.add({
    id: "keys.rpc.cores",
    label: `cores the controller used, ${label}`,
    unit: "cores",
    better: "higher",
    sluice: of(KEYED, (s) => s.serverCores),
    peers: {
      [`the ${generators.length} workers (load processes)`]: of(KEYED, (s) => s.generatorCores),
      "everything else on the machine": of(KEYED, (s) => s.otherCores),
      [`${UNKEYED}: the controller`]: of(UNKEYED, (s) => s.serverCores),
    },
    withoutRatios: true,
    note: "Linux's per-thread accounting over the window (lib/cpu-accounting.ts): below 1 core, the controller was not the bottleneck (the workers, or other work on the 2 cores, were)",
  });
  g.add({
    id: "keys.rpc.throughput",
    label: `key-grants/s, ${label}`,
    unit: "grants/s",
    better: "higher",
    sluice: of(KEYED, (s) => s.grantsPerS),
    peers: { [UNKEYED]: of(UNKEYED, (s) => s.grantsPerS) },
    note: "raw rate: the load generators share the 2 cores with the controller, so this is often their limit",
  });
  g.goal({
    id: "keys.rpc.per_cpu_second",
    text: `≥ ${KEY_GRANTS_GOAL.toLocaleString("en-US")} key-grants per controller CPU-second, 10,000 active keys over the QuotaStream`,
    figure: perCpu,
    value: perCpu.sluice?.median ?? null,
    target: KEY_GRANTS_GOAL,
    compare: ">=",
  });
}

/** consume(key, 1) round the keys for about `windowMs` of this process's CPU: consumes per CPU-second. */
async function rateLimiterFlexiblePerCpuSecond(keys: number, windowMs: number): Promise<number> {
  const limiter = new RateLimiterMemory({ points: 1e9, duration: 60 });
  const names = Array.from({ length: keys }, (_, i) => `key-${i}`);
  for (const name of names) await limiter.consume(name, 1); // every key has its record first
  const start = process.cpuUsage();
  let done = 0;
  for (;;) {
    for (let i = 0; i < 1_000; i++) await limiter.consume(names[done++ % keys] as string, 1);
    const used = process.cpuUsage(start);
    const cpuMs = (used.user + used.system) / 1000;
    if (cpuMs >= windowMs / 2) return (done * 1000) / cpuMs;
  }
}

async function measureKeyFrames(g: GroupContext, client: BenchChild, keys: number): Promise<void> {
  const requestPeriodMs = REQUEST_PERIOD_MS;
  const { framesWarmupMs: warmupMs, framesWindowMs: windowMs } = sizing(g);
  const limit = FRAMES_KEY_LIMIT;
  g.log(
    `frames: ${keys.toLocaleString("en-US")} keys at ${limit}/s each in one client process, request_period ${requestPeriodMs} ms, ${windowMs} ms window after ${warmupMs} ms`,
  );
  await client.waitForType("ready", 60_000);
  const windowFrom = Date.now() + warmupMs;
  const windowTo = windowFrom + windowMs;
  client.send({ type: "run", run: { windowFrom, windowTo, stopAt: windowTo + 100 } });
  const result = await client.waitForType("result", 120_000 + windowTo - Date.now());
  const periods = windowMs / requestPeriodMs;
  const frames = Number(result?.["frames"]) / periods;
  const calls = Number(result?.["requestQuotaCalls"]) / periods;
  const grants = Number(result?.["grants"]) / periods;
  g.log(
    `frames: ${formatNumber(frames)} QuotaStream frames per request_period carrying ${formatNumber(calls)} RequestQuota calls (${formatNumber(calls / frames)} per frame), ${formatNumber(grants)} local grants`,
  );
  g.add({
    id: "keys.client.frames_per_request_period",
    label: `QuotaStream frames a client sends per request_period, ${keys.toLocaleString("en-US")} keys in use`,
    unit: "per request_period",
    better: "lower",
    sluice: [frames],
    peers: {
      "RequestQuota calls in them (one RPC each over unary gRPC)": [calls],
      "units handed to callers per request_period": [grants],
    },
    published: {
      Gubernator:
        "a peer batches the requests it forwards within 500 µs, at most 1,000 per batch (GUBER_BATCH_WAIT, GUBER_BATCH_LIMIT defaults, example.conf); batches of 1,000 seen at peak (README): ≥ 10 requests for 10,000 keys",
    },
    withoutRatios: true,
    note: `one process, connectThrottlers over the QuotaStream, a caller per key looping throttle(1) at the key's limit of ${limit}/s; frames and calls counted by a gRPC interceptor in the client over the window`,
  });
}
