// One client process of the fault harness: it connects to the failover group with @sluice/client's
// connectThrottlers and keeps every throttler backlogged, recording each grant, release, failure
// and dynamic_spec version into its own history file (history.ts). SIGTERM stops it: waiting calls
// are aborted, and any call still unanswered is recorded as pending before it exits.
//
//   node --import tsx test/faults/load-client.ts '<LoadClientOptions as JSON>'
import { setMaxListeners } from "node:events";
import { connectThrottlers, type ThrottlerHandle } from "@sluice/client";
import { SluiceError } from "@sluice/core";
import { HistoryWriter } from "./history.ts";
import { seededRandom } from "./schedule.ts";

export interface LoadClientOptions {
  readonly controllers: readonly string[];
  readonly clientId: string;
  readonly historyFile: string;
  readonly seed: number;
  /** Concurrent callers per throttler id: each loops throttle(1) (and, on a concurrency throttler, holds then releases). */
  readonly callers: Readonly<Record<string, number>>;
  readonly concurrencyIds: readonly string[];
  /** Each throttle() call's deadline. */
  readonly deadlineMs: number;
  /** A concurrency unit is held for a time in [low, high] ms. */
  readonly holdMs: readonly [number, number];
  /** A caller starts at most one call per this many ms (a paced load); none: back to back. */
  readonly paceMs?: number;
}

const options = JSON.parse(process.argv[2] ?? "{}") as LoadClientOptions;
const history = new HistoryWriter(options.historyFile);
const random = seededRandom(options.seed);
const stop = new AbortController();
// Every waiting call listens on `stop`: as many listeners as callers, not a leak.
setMaxListeners(1_000, stop.signal);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Call {
  readonly throttler: string;
  readonly amount: number;
  readonly startedAt: number;
  readonly deadlineAt: number;
}
const waiting = new Set<Call>();

const throttlers = await connectThrottlers({
  controller: options.controllers,
  clientId: options.clientId,
  connectTimeoutMs: 120_000,
  log: (line) => process.stderr.write(`[${new Date().toISOString()} ${options.clientId}] ${line}\n`),
});
process.stdout.write(`client ${options.clientId} connected (dynamic_spec version ${throttlers.dynamicSpecVersion})\n`);

let lastVersion = -1;
function recordVersion(): void {
  const version = throttlers.dynamicSpecVersion;
  if (version === lastVersion) return;
  lastVersion = version;
  history.write({ type: "spec", at: Date.now(), source: "client", who: options.clientId, version });
}
const versionTimer = setInterval(recordVersion, 250);

/** One throttle(1) with a deadline; true when granted. */
async function take(handle: ThrottlerHandle, throttler: string): Promise<boolean> {
  const startedAt = Date.now();
  const call: Call = { throttler, amount: 1, startedAt, deadlineAt: startedAt + options.deadlineMs };
  waiting.add(call);
  // Not AbortSignal.any([stop, AbortSignal.timeout(ms)]): in Node 20 nothing holds the timeout
  // signal strongly (nodejs/node#57736), so after a GC it never fires and the call has no deadline.
  // A plain controller, a timer and a listener on `stop`, all dropped when the call answers.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new DOMException(`deadline of ${options.deadlineMs} ms passed`, "TimeoutError")), options.deadlineMs);
  const onStop = () => deadline.abort(stop.signal.reason);
  if (stop.signal.aborted) onStop();
  else stop.signal.addEventListener("abort", onStop, { once: true });
  try {
    await handle.throttle(1, { signal: deadline.signal });
    waiting.delete(call);
    recordVersion();
    history.write({ type: "grant", at: Date.now(), client: options.clientId, version: throttlers.dynamicSpecVersion, ...call });
    return true;
  } catch (error) {
    waiting.delete(call);
    const code = error instanceof SluiceError ? error.code : error instanceof Error ? error.name : "UNKNOWN";
    history.write({ type: "fail", at: Date.now(), client: options.clientId, code, ...call });
    return false;
  } finally {
    clearTimeout(timer);
    stop.signal.removeEventListener("abort", onStop);
  }
}

async function caller(throttler: string, concurrency: boolean): Promise<void> {
  // Paced callers start spread over one interval, so the load is even from the start.
  let nextStart = Date.now() + (options.paceMs ?? 0) * random();
  while (!stop.signal.aborted) {
    if (options.paceMs !== undefined) {
      await sleep(Math.max(0, nextStart - Date.now()));
      nextStart = Math.max(nextStart + options.paceMs, Date.now() - options.paceMs);
      if (stop.signal.aborted) break;
    }
    const handle = throttlers.tryGetThrottler(throttler);
    if (handle === null) {
      await sleep(200);
      continue;
    }
    const granted = await take(handle, throttler);
    if (!granted) {
      // A refusal is an answer; back off a little so a refusing controller is not spun on.
      await sleep(100 + random() * 200);
      continue;
    }
    if (!concurrency) continue;
    const [low, high] = options.holdMs;
    await sleep(low + random() * (high - low));
    // Recorded before release() so that no other client can be recorded holding these units first.
    history.write({ type: "release", at: Date.now(), client: options.clientId, throttler, amount: 1 });
    try {
      handle.release(1);
    } catch (error) {
      process.stderr.write(`[${options.clientId}] release on "${throttler}" failed: ${String(error)}\n`);
    }
  }
}

const loops: Promise<void>[] = [];
for (const [throttler, count] of Object.entries(options.callers)) {
  for (let i = 0; i < count; i++) loops.push(caller(throttler, options.concurrencyIds.includes(throttler)));
}

let stopping = false;
async function shutdown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  stop.abort();
  // Aborted calls answer at once; give the loops a moment, then record what never answered.
  await Promise.race([Promise.all(loops), sleep(5_000)]);
  const now = Date.now();
  for (const call of waiting)
    history.write({
      type: "pending",
      at: now,
      client: options.clientId,
      amount: call.amount,
      throttler: call.throttler,
      startedAt: call.startedAt,
      deadlineAt: call.deadlineAt,
    });
  clearInterval(versionTimer);
  history.close();
  await Promise.race([throttlers.close(), sleep(3_000)]);
  process.stdout.write(`client ${options.clientId} stopped\n`);
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown());
process.on("SIGINT", () => void shutdown());
