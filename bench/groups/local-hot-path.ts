// Group 1: what one throttle(1) costs a caller when the quota is already in the local pool, against
// the in-process limiters people reach for and a bare `await Promise.resolve()`. Limits are set so
// that they never bind: every figure is pure bookkeeping overhead.
import { PrefetchingThrottler, systemClock, type Throttler } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import { DistributedThrottlerFactory } from "@sluice/client";
import { validateDynamicSpec } from "@sluice/spec";
import Bottleneck from "bottleneck";
import pThrottle from "p-throttle";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup } from "../lib/group.ts";
import { countTimers } from "../lib/timer-count.ts";
import { installedVersion } from "../lib/versions.ts";
import { measureInputThrottle } from "./input-throttle-cost.ts";

const BURST = 10_000;
/** More quota than any run can use, so the pool never runs dry and no refill is ever asked for. */
const PREFILLED_POOL = 1e15;

interface Subject {
  readonly name: string;
  /** One awaited call. */
  readonly call: () => Promise<unknown>;
  /** Calls per burst: bottleneck serializes its jobs on a 0 ms timer each, so 10,000 would take ~25 s a run. */
  readonly burstSize: number;
  /** Largest number of calls per timed measurement (bottleneck takes milliseconds per call). */
  readonly maxCalls: number;
  readonly note?: string;
}

interface SyncSubject {
  readonly name: string;
  readonly call: () => boolean;
}

export const localHotPath: BenchGroup = {
  id: "local",
  title: "1. Local hot path: throttle(1) and tryAcquire(1) with quota already in the pool",
  async run(g) {
    const reps = g.pick(7, 1);
    const targetMs = g.pick(150, 8);
    const sluice = sluiceHandle();
    const core = sluiceCore();
    const bottleneckBurst = g.pick(500, 50);
    const bottleneckCalls = g.pick(250, 20);

    const v = (name: string) => `${name} ${installedVersion(name)}`;
    const subjects: Subject[] = [
      { name: "Sluice", call: () => sluice.handle.throttle(1), burstSize: BURST, maxCalls: Infinity },
      { name: "Sluice core client", call: () => core.throttle(1), burstSize: BURST, maxCalls: Infinity },
      { name: "baseline: await Promise.resolve()", call: () => Promise.resolve(), burstSize: BURST, maxCalls: Infinity },
      { name: v("p-throttle"), call: pThrottleCall(), burstSize: BURST, maxCalls: Infinity },
      { name: `${v("rate-limiter-flexible")} (memory)`, call: rateLimiterFlexibleCall(), burstSize: BURST, maxCalls: Infinity },
      {
        name: v("bottleneck"),
        call: bottleneckCall(),
        burstSize: bottleneckBurst,
        maxCalls: bottleneckCalls,
        note: `bursts of ${bottleneckBurst} and ${bottleneckCalls} sequential calls per run: it runs each job after a 0 ms timer, one after another, so a burst of ${BURST.toLocaleString("en-US")} would take ~25 s per run`,
      },
    ];
    const syncSubjects: SyncSubject[] = [
      { name: "Sluice", call: () => sluice.handle.tryAcquire(1) },
      { name: "Sluice core client", call: () => core.tryAcquire(1) },
      { name: "baseline: counter check", call: bareCounter() },
    ];

    g.log(`calibrating ${subjects.length} async and ${syncSubjects.length} sync subjects (~${targetMs} ms per measurement, ${reps} runs)`);
    const seqCalls = new Map<Subject, number>();
    const burstCalls = new Map<Subject, number>();
    for (const subject of subjects) {
      seqCalls.set(subject, await calibrate((n) => sequential(subject.call, n), targetMs, 1, subject.maxCalls));
      burstCalls.set(
        subject,
        await calibrate((n) => bursts(subject.call, n, subject.burstSize), targetMs, subject.burstSize, Math.max(subject.maxCalls, subject.burstSize)),
      );
    }
    const syncCalls = new Map<SyncSubject, number>();
    for (const subject of syncSubjects) syncCalls.set(subject, await calibrate(async (n) => synchronous(subject.call, n), targetMs, 1000, Infinity));

    const seq = new Map<string, number[]>();
    const burst = new Map<string, number[]>();
    const sync = new Map<string, number[]>();
    for (let rep = 0; rep < reps; rep++) {
      // Rotate the order, so that no subject always runs right after the same neighbour's garbage.
      for (const subject of rotate(subjects, rep)) {
        push(seq, subject.name, await timePerCall((n) => sequential(subject.call, n), seqCalls.get(subject) ?? 1));
        push(burst, subject.name, await timePerCall((n) => bursts(subject.call, n, subject.burstSize), burstCalls.get(subject) ?? 1));
      }
      for (const subject of rotate(syncSubjects, rep)) {
        push(sync, subject.name, await timePerCall(async (n) => synchronous(subject.call, n), syncCalls.get(subject) ?? 1));
      }
      g.log(
        `run ${rep + 1}/${reps}: Sluice throttle ${formatNumber(seq.get("Sluice")?.at(-1) ?? NaN)} µs sequential, ${formatNumber(burst.get("Sluice")?.at(-1) ?? NaN)} µs in bursts; tryAcquire ${formatNumber(sync.get("Sluice")?.at(-1) ?? NaN)} µs`,
      );
    }

    const timersSeq = new Map<string, number[]>();
    const timersBurst = new Map<string, number[]>();
    for (const subject of subjects) {
      const n = Math.min(subject.burstSize, 2_000);
      timersSeq.set(subject.name, [(await countTimers(() => sequential(subject.call, n))) / n]);
      timersBurst.set(subject.name, [(await countTimers(() => bursts(subject.call, n, n))) / n]);
    }
    const timersSync = (await countTimers(async () => synchronous(syncSubjects[0]?.call ?? (() => true), 10_000))) / 10_000;

    const peersOf = (values: Map<string, number[]>, notes = true) =>
      Object.fromEntries(
        subjects
          .filter((s) => s.name !== "Sluice")
          .map((s) => [s.name, notes && s.note ? { runs: values.get(s.name) ?? [], note: s.note } : (values.get(s.name) ?? [])]),
      );
    const sequentialFigure = g.add({
      id: "local.throttle.sequential",
      label: "awaited throttle(1), one at a time",
      unit: "µs/call",
      better: "lower",
      sluice: seq.get("Sluice") ?? null,
      peers: peersOf(seq),
      note: "Sluice = the ThrottlerHandle user code gets from ctx.getThrottlerOrThrow, over a prefetching client whose pool was filled with release(); core client = the PrefetchingThrottler alone",
    });
    const burstFigure = g.add({
      id: "local.throttle.burst",
      label: `throttle(1) in bursts of ${BURST.toLocaleString("en-US")}, then Promise.all`,
      unit: "µs/call",
      better: "lower",
      sluice: burst.get("Sluice") ?? null,
      peers: peersOf(burst),
    });
    const tryFigure = g.add({
      id: "local.tryAcquire",
      label: "tryAcquire(1) (synchronous)",
      unit: "µs/call",
      better: "lower",
      sluice: sync.get("Sluice") ?? null,
      peers: Object.fromEntries(syncSubjects.filter((s) => s.name !== "Sluice").map((s) => [s.name, sync.get(s.name) ?? []])),
      note: "p-throttle, rate-limiter-flexible and bottleneck have no synchronous acquire; the baseline is an inline `if (available >= n) available -= n` on a plain object",
    });
    const timerFigure = g.add({
      id: "local.timers",
      label: "timers created per throttle(1) (sequential; bursts in note)",
      unit: "timers/call",
      better: "lower",
      sluice: timersSeq.get("Sluice") ?? null,
      peers: Object.fromEntries(
        subjects
          .filter((s) => s.name !== "Sluice")
          .map((s) => [s.name, { runs: timersSeq.get(s.name) ?? [], note: `in a burst: ${formatNumber(timersBurst.get(s.name)?.[0] ?? NaN)}/call` }]),
      ),
      withoutRatios: true,
      note: `counted with async_hooks (Timeout and Immediate resources), one pass each; Sluice in a burst: ${formatNumber(timersBurst.get("Sluice")?.[0] ?? NaN)}/call; tryAcquire: ${formatNumber(timersSync)}/call`,
    });

    if (sluice.rpcs() > 0) g.note(`the hot path called the controller ${sluice.rpcs()} times: the pool should have answered every call`);
    else g.note("the Sluice subjects made no RPC during the whole group: every call was answered by the local pool");
    sluice.close();
    core.close();

    g.goal({
      id: "local.throttle.sequential",
      text: "≤ 0.3 µs per awaited throttle(1) (one at a time)",
      figure: sequentialFigure,
      value: sequentialFigure.sluice?.median ?? null,
      target: 0.3,
      compare: "<=",
    });
    g.goal({
      id: "local.throttle.burst",
      text: "≤ 0.3 µs per awaited throttle(1) (bursts of 10,000)",
      figure: burstFigure,
      value: burstFigure.sluice?.median ?? null,
      target: 0.3,
      compare: "<=",
    });
    g.goal({
      id: "local.tryAcquire",
      text: "≤ 0.05 µs per tryAcquire(1)",
      figure: tryFigure,
      value: tryFigure.sluice?.median ?? null,
      target: 0.05,
      compare: "<=",
    });
    const worstTimers = Math.max(timersSeq.get("Sluice")?.[0] ?? NaN, timersBurst.get("Sluice")?.[0] ?? NaN, timersSync);
    await measureInputThrottle(g);

    g.goal({
      id: "local.timers",
      text: "no timer per call",
      figure: timerFigure,
      value: worstTimers,
      target: 0,
      compare: "<=",
      describe: `${formatNumber(worstTimers)} timers per call (sequential, burst and tryAcquire)`,
    });
  },
};

/** A job's throttler handle with a filled pool; its controller connection refuses to be used. */
function sluiceHandle(): { handle: Throttler; rpcs: () => number; close: () => void } {
  let rpcs = 0;
  const parsed = validateDynamicSpec({ throttlers: { hot: {} }, computations: {} });
  if (!parsed.ok) throw new Error(`bench spec invalid: ${JSON.stringify(parsed.issues)}`);
  const factory = new DistributedThrottlerFactory({
    computation: "Bench",
    clientId: "bench/Bench/0",
    clock: systemClock,
    client: (): QuotaServiceClient => {
      rpcs += 1;
      throw new Error("the hot path must not reach the controller");
    },
  });
  factory.reconfigure(parsed.value);
  const handle = factory.getThrottlerOrThrow("hot");
  handle.release(PREFILLED_POOL);
  return { handle, rpcs: () => rpcs, close: () => factory.close() };
}

/** The core prefetching client alone, over a remote that would grant at once (never reached). */
function sluiceCore(): PrefetchingThrottler {
  const client = new PrefetchingThrottler(
    { targetRps: 1, minPrefetchAmount: 1, maxPrefetchAmount: 1e9, windowMs: 10_000 },
    { acquire: () => Promise.resolve() },
    systemClock,
    "core",
  );
  client.release(PREFILLED_POOL);
  return client;
}

function pThrottleCall(): () => Promise<unknown> {
  // Windowed mode (the default) with a limit no run reaches within one interval. The throttled
  // function always returns a promise (index.js: `return new Promise(...)`); its typings echo the
  // wrapped function's return type instead, hence the cast.
  const throttled = pThrottle({ limit: Number.MAX_SAFE_INTEGER, interval: 1000 })(() => undefined);
  return throttled as unknown as () => Promise<unknown>;
}

function rateLimiterFlexibleCall(): () => Promise<unknown> {
  const limiter = new RateLimiterMemory({ points: Number.MAX_SAFE_INTEGER, duration: 1 });
  return () => limiter.consume("bench", 1);
}

function bottleneckCall(): () => Promise<unknown> {
  // No maxConcurrent, no minTime, no reservoir: nothing ever waits for a limit.
  const limiter = new Bottleneck({});
  const job = () => Promise.resolve();
  return () => limiter.schedule(job);
}

function bareCounter(): () => boolean {
  const pool = { available: PREFILLED_POOL };
  return () => {
    if (pool.available >= 1) {
      pool.available -= 1;
      return true;
    }
    return false;
  };
}

async function sequential(call: () => Promise<unknown>, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await call();
}

async function bursts(call: () => Promise<unknown>, n: number, size: number): Promise<void> {
  const pending: Promise<unknown>[] = new Array<Promise<unknown>>(size);
  for (let done = 0; done < n; done += size) {
    for (let i = 0; i < size; i++) pending[i] = call();
    await Promise.all(pending);
  }
}

function synchronous(call: () => boolean, n: number): void {
  let refused = 0;
  for (let i = 0; i < n; i++) if (!call()) refused += 1;
  if (refused > 0) throw new Error(`tryAcquire refused ${refused} of ${n} calls with a full pool`);
}

/** Calls per measurement so that one takes about `targetMs` (a multiple of `step`, at most `max`). */
async function calibrate(work: (n: number) => Promise<void>, targetMs: number, step: number, max: number): Promise<number> {
  let n = step;
  for (;;) {
    const startedAt = performance.now();
    await work(n);
    const elapsed = performance.now() - startedAt;
    if (elapsed >= targetMs / 4 || n >= max) {
      const scaled = Math.ceil((n * targetMs) / Math.max(elapsed, 0.001) / step) * step;
      return Math.max(step, Math.min(max, scaled));
    }
    n = Math.min(max, n * 4);
  }
}

async function timePerCall(work: (n: number) => Promise<void>, n: number): Promise<number> {
  const startedAt = process.hrtime.bigint();
  await work(n);
  return Number(process.hrtime.bigint() - startedAt) / 1000 / n;
}

function push(map: Map<string, number[]>, key: string, value: number): void {
  const values = map.get(key);
  if (values) values.push(value);
  else map.set(key, [value]);
}

function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
