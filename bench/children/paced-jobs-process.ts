// Job-like callers in one process, each looping "take 1 unit, then call the protected system" as fast
// as the limiter allows, and noting when each unit reached its caller (epoch ms, sub-ms) inside a
// window set by the parent — so that the parent can merge the processes' timelines and count units
// in every window. Modes:
//   "sluice": one client per job through DistributedThrottlerFactory (as the runtime builds it: a
//   PacedThrottler for a smooth throttler, a PrefetchingThrottler otherwise), against a controller;
//   "p-throttle", "bottleneck": one in-process limiter per process, paced at `ratePerProcess`, shared
//   by this process's jobs (neither coordinates across processes without an external store).
// Events: ready; taking and counted (a gated run, see Schedule.gated); result {times, rpcs, cpuMs, timers, jobs} at the end.
import { type Clock, systemClock } from "@sluice/core";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { DistributedThrottlerFactory, DynamicSpecWatcher } from "@sluice/client";
import type { DynamicSpec } from "@sluice/spec";
import Bottleneck from "bottleneck";
import pThrottle from "p-throttle";
import { configArgument, emit, onCommands } from "../lib/child-io.ts";

interface Config {
  readonly mode: "sluice" | "p-throttle" | "bottleneck";
  readonly clientIds: readonly string[];
  /** Sluice mode: the controller's address and the throttler's id. */
  readonly controller?: string;
  readonly throttlerId?: string;
  /** Peer modes: units per second this process's limiter lets through. */
  readonly ratePerProcess?: number;
}

/** Epoch ms: the measured window opens and closes, the callers stop. */
interface Window {
  readonly windowFrom: number;
  readonly windowTo: number;
  readonly stopAt: number;
}

interface Schedule extends Window {
  readonly startAt: number;
  /**
   * Quick mode: the callers start at `startAt` and the go's own window is ignored. A `taking` event
   * says the first unit reached a caller; the parent then opens the window with a `window` command
   * {windowFrom}; `counted` says the first unit inside it reached one, and a second `window`
   * command {windowFrom, windowTo, stopAt} closes it. So every process's units flow before the
   * window opens, and it closes only once each has counted one.
   */
  readonly gated?: boolean;
}

const config = configArgument<Config>();
// The parent stops this process right after its result: exit normally, so that a `--cpu-prof` profile is written.
process.once("SIGTERM", () => process.exit(0));
const epochNow = () => performance.timeOrigin + performance.now();
let rpcs = 0;
/**
 * Timers the clients armed (Sluice mode): each is one event-loop wake-up, which is most of what a
 * smooth client costs. One counting clock for every client of the process, as one `systemClock`
 * would be: paced clients on one clock share their wake-ups.
 */
let timers = 0;
const systemSetTimer = systemClock.setTimer?.bind(systemClock);
const systemAfterTurn = systemClock.afterTurn?.bind(systemClock);
const countingClock: Clock = {
  now: systemClock.now,
  // A smooth client moves each hand-out's departure to the end of its turn (DispatchWindow), as in a worker.
  ...(systemAfterTurn ? { afterTurn: systemAfterTurn } : {}),
  sleep: (ms, signal) => {
    timers += 1;
    return systemClock.sleep(ms, signal);
  },
  // The shared wake-ups arm their timer through this when the clock has it (as systemClock does).
  ...(systemSetTimer
    ? {
        setTimer: (ms: number, fire: () => void) => {
          timers += 1;
          return systemSetTimer(ms, fire);
        },
      }
    : {}),
};
const closers: (() => void | Promise<void>)[] = [];

/** Takes one unit: resolves when the caller may call the protected system. */
async function takers(): Promise<(() => Promise<unknown>)[]> {
  if (config.mode === "sluice") {
    const client = createGrpcQuotaClient(config.controller ?? "");
    let spec: DynamicSpec | null = null;
    const watcher = new DynamicSpecWatcher({ client: () => client, clientId: "bench-paced", clock: systemClock, onSpec: (next) => (spec = next) });
    await watcher.start();
    const current = spec as DynamicSpec | null;
    if (!current) throw new Error("no dynamic_spec from the controller");
    closers.push(
      () => watcher.close(),
      () => client.close(),
    );
    return config.clientIds.map((clientId) => {
      const factory = new DistributedThrottlerFactory({ computation: "Bench", clientId, client: () => client, clock: countingClock, onRpc: () => (rpcs += 1) });
      factory.reconfigure(current);
      closers.unshift(() => factory.close());
      const handle = factory.getThrottlerOrThrow(config.throttlerId ?? "");
      return () => handle.throttle(1);
    });
  }
  const rate = config.ratePerProcess ?? 1;
  if (config.mode === "p-throttle") {
    // One call per 1000/rate ms: the finest pacing p-throttle offers (its window is `interval`).
    const throttled = pThrottle({ limit: 1, interval: 1000 / rate })(() => undefined) as unknown as () => Promise<unknown>;
    return config.clientIds.map(() => throttled);
  }
  const limiter = new Bottleneck({ minTime: 1000 / rate });
  closers.push(() => limiter.stop({ dropWaitingJobs: true }).catch(() => undefined));
  const job = () => Promise.resolve();
  return config.clientIds.map(() => () => limiter.schedule(job));
}

const take = await takers();
const times: number[] = [];
let cpuFrom = 0;
let cpuTo = 0;
let rpcsFrom = 0;
let rpcsTo = 0;
let timersFrom = 0;
let timersTo = 0;
const cpuMs = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};
const at = (epochMs: number, work: () => void) => setTimeout(work, Math.max(0, epochMs - Date.now()));
let running = true;
const never = Number.POSITIVE_INFINITY;
let window: Window = { windowFrom: never, windowTo: never, stopAt: never };
/** Arms the readings at each edge of the window once that edge is known (a gated run learns them one by one). */
const open = (given: Partial<Window>) => {
  const known = window;
  window = { windowFrom: given.windowFrom ?? never, windowTo: given.windowTo ?? never, stopAt: given.stopAt ?? never };
  if (known.windowFrom === never && window.windowFrom !== never)
    at(window.windowFrom, () => {
      cpuFrom = cpuMs();
      rpcsFrom = rpcs;
      timersFrom = timers;
    });
  if (known.windowTo === never && window.windowTo !== never)
    at(window.windowTo, () => {
      cpuTo = cpuMs();
      rpcsTo = rpcs;
      timersTo = timers;
    });
  if (known.stopAt === never && window.stopAt !== never) at(window.stopAt, () => (running = false));
};
const schedule = await new Promise<Schedule>((resolve) => {
  onCommands((command) => {
    if (command.type === "go") resolve(command as unknown as Schedule);
    else if (command.type === "window") open(command as unknown as Window);
  });
  emit({ type: "ready" });
});
if (!schedule.gated) open(schedule);
await new Promise((resolve) => setTimeout(resolve, Math.max(0, schedule.startAt - Date.now())));
const gate = schedule.gated ? { taking: false, counted: false } : null;
const pass = (event: "taking" | "counted") => {
  if (!gate || gate[event]) return;
  gate[event] = true;
  emit({ type: event });
};
await Promise.all(
  take.map(async (one) => {
    while (running) {
      await one();
      const now = epochNow();
      pass("taking");
      if (now >= window.windowFrom && now < window.windowTo) {
        times.push(now);
        pass("counted");
      }
    }
  }),
);
// A gated window's end came after the units that followed it: they do not count.
const counted = gate ? times.filter((time) => time < window.windowTo) : times;
emit({ type: "result", times: counted, rpcs: rpcsTo - rpcsFrom, timers: timersTo - timersFrom, cpuMs: cpuTo - cpuFrom, jobs: take.length });
for (const close of closers) await close();
process.exit(0);
