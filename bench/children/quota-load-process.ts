// A RequestQuota load generator in its own process, so that the load never shares an event loop
// (or a process's CPU accounting) with the server it measures. One process serves many runs: each
// `run` command says how (closed loop: N callers, each sending its next request when the last was
// answered; open loop: a fixed arrival rate, whatever the answers do) and when (epoch ms, so that
// several generator processes start, measure and stop together).
// Events: ready {pid}; result {calls, latenciesMs, lagsMs, errors, firstError} per run (a gated
// run also sends loaded and counted, see LoadRun.gated).
import { createGrpcQuotaClient, createStreamQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { configArgument, emit, onCommands } from "../lib/child-io.ts";
import { frameLoop } from "../lib/frame-load.ts";
import { CALLERS_PER_CHANNEL } from "../lib/grpc-load.ts";
import { before, type WindowBounds } from "../lib/load-window.ts";

export interface LoadRun {
  readonly address: string;
  readonly throttlerId: string;
  /** A keyed throttler: each request names one of this many keys, the callers going round them all. */
  readonly keys?: number;
  readonly mode: "closed" | "open";
  /**
   * Unary RequestQuota calls (default), or a QuotaStream per channel (a worker's multiplexed stream),
   * or "frames": this process is one worker with ONE QuotaStream whose frames carry `callsPerFrame`
   * calls each, `clients` calls open at most (bench/lib/frame-load.ts; closed loop only).
   */
  readonly transport?: "unary" | "stream" | "frames";
  readonly callsPerFrame?: number;
  /** Closed loop: callers. Open loop: client ids the requests rotate over (one channel per 16). */
  readonly clients: number;
  /** Open loop: requests per second sent by this process. */
  readonly ratePerS?: number;
  /** Epoch ms: load starts, the measured window opens and closes, load stops. */
  readonly startAt: number;
  readonly windowFrom: number;
  readonly windowTo: number;
  readonly stopAt: number;
  /**
   * Quick mode: the load starts at `startAt` as ever, but the window comes later in `window`
   * commands (these three are ignored): first {windowFrom}, then {windowFrom, windowTo, stopAt}
   * to close it. Events `loaded` (the first call answered) and `counted` (the first call counted
   * in the window) let the parent open the window only once every generator's load flows, and
   * close it only once each has counted a call.
   */
  readonly gated?: boolean;
}

/** The client's default rpc_timeout: every refill carries it as its deadline. */
const RPC_TIMEOUT_MS = 30_000;
const config = configArgument<{ readonly name: string }>();
const epochNow = (): number => performance.timeOrigin + performance.now();
const never = Number.POSITIVE_INFINITY;

/** When calls count and when the load stops: the run's, or a gated run's `window` commands. */
let bounds: WindowBounds = { windowFrom: never, windowTo: never, stopAt: never };
/** A gated run's events already sent; null for a run with its window fixed in advance. */
let gate: { loaded: boolean; counted: boolean } | null = null;
const pass = (event: "loaded" | "counted"): void => {
  if (!gate || gate[event]) return;
  gate[event] = true;
  emit({ type: event });
};

onCommands(async (command) => {
  if (command.type === "window") {
    const given = (key: string) => (command[key] === undefined ? never : Number(command[key]));
    bounds = { windowFrom: given("windowFrom"), windowTo: given("windowTo"), stopAt: given("stopAt") };
    return;
  }
  if (command.type !== "run") return;
  const run = command["run"] as LoadRun;
  bounds = run.gated ? { windowFrom: never, windowTo: never, stopAt: never } : { windowFrom: run.windowFrom, windowTo: run.windowTo, stopAt: run.stopAt };
  gate = run.gated ? { loaded: false, counted: false } : null;
  if (run.transport === "frames") {
    emit({ type: "result", ...(await framesRun(run)) });
    return;
  }
  const channels: QuotaServiceClient[] = Array.from({ length: Math.max(1, Math.ceil(run.clients / CALLERS_PER_CHANNEL)) }, () =>
    run.transport === "stream" ? createStreamQuotaClient(run.address) : createGrpcQuotaClient(run.address),
  );
  // Connect every channel before the start (a first call each): connection setup is not load.
  await Promise.all(
    channels.map((channel, i) => call(channel, run, `warm/${process.pid}/${i}`, `${config.name}-warm-${Date.now()}-${i}`).catch(() => undefined)),
  );
  const result = run.mode === "closed" ? await closedLoop(run, channels) : await openLoop(run, channels);
  for (const channel of channels) channel.close();
  emit({ type: "result", ...result });
});
emit({ type: "ready", pid: process.pid });

interface Outcome {
  calls: number;
  latenciesMs: number[];
  /** Open loop: how late each send left after its planned time (the generator's own delay). */
  lagsMs: number[];
  errors: number;
  firstError: string | null;
}

function call(channel: QuotaServiceClient, run: LoadRun, clientId: string, requestId: string, seq = 0): Promise<unknown> {
  const key = run.keys ? { key: `key-${seq % run.keys}` } : {};
  return channel.requestQuota({ throttlerId: run.throttlerId, clientId, amount: 1, timestampMs: 0, quotaClassId: "", requestId, ...key });
}

async function closedLoop(run: LoadRun, channels: readonly QuotaServiceClient[]): Promise<Outcome> {
  const outcome: Outcome = { calls: 0, latenciesMs: [], lagsMs: [], errors: 0, firstError: null };
  /** A gated run: when each counted call was answered, for the window's end known only later. */
  const countedAt: number[] = [];
  await sleepUntil(run.startAt);
  await Promise.all(
    Array.from({ length: run.clients }, async (_, caller) => {
      const channel = channels[Math.floor(caller / CALLERS_PER_CHANNEL)] ?? channels[0];
      if (!channel) return;
      for (let i = 0; epochNow() < bounds.stopAt; i++) {
        const sentAt = epochNow();
        try {
          // Caller c's i-th request: key (c + i × callers), so the callers together go round every key.
          await call(channel, run, `load/${config.name}/${caller}`, `${config.name}-${run.startAt}-${caller}-${i}`, caller + i * run.clients);
          const answeredAt = epochNow();
          if (answeredAt >= bounds.windowFrom && answeredAt < bounds.windowTo) {
            outcome.calls += 1;
            outcome.latenciesMs.push(answeredAt - sentAt);
            if (gate) {
              countedAt.push(answeredAt);
              pass("counted");
            }
          }
          pass("loaded");
        } catch (error) {
          noteError(outcome, error);
          if (outcome.errors > 1000) return;
        }
      }
    }),
  );
  if (gate) outcome.latenciesMs = before(outcome.latenciesMs, countedAt, bounds.windowTo);
  if (gate) outcome.calls = outcome.latenciesMs.length;
  return outcome;
}

/**
 * Sends request k at startAt + k / rate, whatever the answers do, and times each from its planned
 * send time (so a late send counts against the latency instead of hiding it). A 1 ms tick sends
 * every request that has come due; the figures count requests planned inside the window.
 */
async function openLoop(run: LoadRun, channels: readonly QuotaServiceClient[]): Promise<Outcome> {
  const outcome: Outcome = { calls: 0, latenciesMs: [], lagsMs: [], errors: 0, firstError: null };
  const rate = run.ratePerS ?? 0;
  if (!(rate > 0)) throw new Error(`open loop needs ratePerS > 0, got ${String(run.ratePerS)}`);
  const intervalMs = 1000 / rate;
  const inFlight = new Set<Promise<void>>();
  /** A gated run: the planned send time of each lag and each latency, for the window's end known only later. */
  const lagPlanned: number[] = [];
  const latencyPlanned: number[] = [];
  await sleepUntil(run.startAt);
  // A gated run's warm-up may end past its startAt: its schedule starts now, not with a backlog.
  const startAt = run.gated ? Math.max(run.startAt, epochNow()) : run.startAt;
  let k = 0;
  while (true) {
    const now = epochNow();
    if (now >= bounds.stopAt) break;
    for (let plannedAt = startAt + k * intervalMs; plannedAt <= now && plannedAt < bounds.stopAt; plannedAt = startAt + k * intervalMs) {
      const index = k++;
      const channel = channels[index % channels.length];
      if (!channel) break;
      const inWindow = plannedAt >= bounds.windowFrom && plannedAt < bounds.windowTo;
      if (inWindow) outcome.lagsMs.push(epochNow() - plannedAt);
      if (inWindow && gate) lagPlanned.push(plannedAt);
      const sent: Promise<void> = call(channel, run, `load/${config.name}/${index % run.clients}`, `${config.name}-${run.startAt}-${index}`, index).then(
        () => {
          if (inWindow) {
            outcome.calls += 1;
            outcome.latenciesMs.push(epochNow() - plannedAt);
            if (gate) {
              latencyPlanned.push(plannedAt);
              pass("counted");
            }
          }
          pass("loaded");
        },
        (error: unknown) => noteError(outcome, error),
      );
      inFlight.add(sent);
      void sent.finally(() => inFlight.delete(sent));
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(inFlight);
  if (gate) {
    outcome.lagsMs = before(outcome.lagsMs, lagPlanned, bounds.windowTo);
    outcome.latenciesMs = before(outcome.latenciesMs, latencyPlanned, bounds.windowTo);
    outcome.calls = outcome.latenciesMs.length;
  }
  return outcome;
}

/**
 * One worker's stream of many-call frames: `clients` calls open at most, in frames of `callsPerFrame`.
 * Its window is this process's `bounds` as they stand at each answer frame, so a gated run's
 * `window` commands move it as they do the other transports'.
 */
function framesRun(run: LoadRun) {
  if (run.mode !== "closed") throw new Error("transport frames runs a closed loop only");
  const callsPerFrame = Math.max(1, Math.min(run.callsPerFrame ?? 256, run.clients));
  return frameLoop({
    address: run.address,
    throttlerId: run.throttlerId,
    keys: run.keys ?? 0,
    clientId: `worker/${config.name}`,
    callsPerFrame,
    framesInFlight: Math.max(1, Math.round(run.clients / callsPerFrame)),
    timeoutMs: RPC_TIMEOUT_MS,
    startAt: run.startAt,
    bounds: () => bounds,
    gated: gate !== null,
    ...(gate ? { onAnswered: () => pass("loaded"), onCounted: () => pass("counted") } : {}),
    keyOffset: Math.floor(Math.random() * Math.max(1, run.keys ?? 1)),
  });
}

function noteError(outcome: Outcome, error: unknown): void {
  outcome.errors += 1;
  outcome.firstError ??= error instanceof Error ? error.message : String(error);
}

async function sleepUntil(epochMs: number): Promise<void> {
  const ms = epochMs - epochNow();
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
}
