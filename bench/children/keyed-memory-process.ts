// Heap per key, in a process started with --expose-gc: one subject per process in a full run (so no
// subject's garbage is counted against another), all of them in one in quick mode. Events: result
// {subject, …} per subject, then it exits.
//   subject "controller": a Controller (docs/design.md §11.4) on a ManualClock, every key created by a
//     real RequestQuota (half of them left in debt); heap per key while `activeKeys` keys have a
//     bucket each, then per key once `keys` keys have gone idle (parked as their balance);
//   subject "rate-limiter-flexible": RateLimiterMemory with one consume per key (a record and a timer
//     per key until its window ends);
//   subject "client": a DistributedThrottlerFactory (one job's clients) using `keys` keys once each
//     through forKey, against a stand-in controller that grants at once: heap per key used while the
//     keys' clients are kept, then after they were idle long enough to be dropped.
import { DistributedThrottlerFactory } from "@sluice/client";
import { Controller } from "@sluice/controller";
import { ManualClock, SluiceError } from "@sluice/core";
import type { CallContext, QuotaServiceClient } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { configArgument, emit } from "../lib/child-io.ts";

interface Config {
  readonly subjects: readonly ("controller" | "rate-limiter-flexible" | "client")[];
  readonly keys: number;
  readonly activeKeys: number;
}

const config = configArgument<Config>();
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("keyed-memory-process needs --expose-gc");
const collect = gc;
const T0 = 1_700_000_000_000;
const BATCH = 10_000;

function heapUsed(): number {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

function spec(throttler: Record<string, unknown>) {
  const parsed = validateDynamicSpec({ throttlers: { per_customer: throttler } });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.value;
}

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });

async function controller(): Promise<Record<string, number>> {
  const clock = new ManualClock(T0);
  const dynamicSpec = spec({ limit: 10, period: "1s", keyed: { max_keys: Math.max(config.keys, config.activeKeys), idle_timeout: "1h" } });
  const controller = new Controller({ dynamicSpec, computations: [], clock });
  const ask = (i: number) =>
    controller.requestQuota(
      { throttlerId: "per_customer", clientId: "w1", amount: i % 2 === 0 ? 1 : 15, timestampMs: 0, quotaClassId: "", requestId: "", key: `customer-${i}` },
      context(),
    );
  const keyed = () => controller.snapshot().throttlers.find((t) => t.id === "per_customer")?.keyed;
  const empty = heapUsed();
  // Active keys: every bucket live at once (each asked for within the parking delay).
  for (let i = 0; i < config.activeKeys; i++) await ask(i);
  const active = heapUsed();
  const activeKeys = keyed()?.activeKeys ?? 0;
  // Idle keys: created in batches, each batch parked before the next (as keys used over hours would be).
  await clock.advance(61_000);
  for (let start = config.activeKeys; start < config.keys; start += BATCH) {
    for (let i = start; i < Math.min(config.keys, start + BATCH); i++) await ask(i);
    await clock.advance(61_000);
  }
  const idle = heapUsed();
  const snapshot = keyed();
  if (snapshot?.activeKeys !== 0 || snapshot.keys !== config.keys) throw new Error(`expected ${config.keys} parked keys, got ${JSON.stringify(snapshot)}`);
  controller.close();
  return { activeKeys, bytesPerActiveKey: (active - empty) / activeKeys, idleKeys: snapshot.keys, bytesPerIdleKey: (idle - empty) / snapshot.keys };
}

async function rateLimiterFlexible(): Promise<Record<string, number>> {
  // 10 points per second as the Sluice template; a long duration keeps every record for the reading.
  const limiter = new RateLimiterMemory({ points: 600, duration: 60 });
  const empty = heapUsed();
  for (let i = 0; i < config.keys; i++) await limiter.consume(`customer-${i}`, i % 2 === 0 ? 1 : 15);
  const held = heapUsed();
  return { keys: config.keys, bytesPerKey: (held - empty) / config.keys };
}

/** Grants every request at once and keeps nothing: only the client's own memory is measured. */
function grantingStandIn(): QuotaServiceClient {
  const unavailable = () => Promise.reject(new SluiceError("CONTROLLER_UNAVAILABLE", "not served by the stand-in"));
  return {
    requestQuota: async (call) => ({ granted: call.amount, waitedMs: 0 }),
    releaseQuota: async () => {},
    watchDynamicSpec: unavailable,
    updateDynamicSpec: unavailable,
    describeThrottlers: unavailable,
    renewLeases: async () => ({ held: 0 }),
    reportWatermarks: unavailable,
    close: () => {},
  } as QuotaServiceClient;
}

async function client(): Promise<Record<string, number>> {
  const clock = new ManualClock(T0);
  const remote = grantingStandIn();
  const factory = new DistributedThrottlerFactory({ computation: "Bench", clientId: "w1/Bench/0", client: () => remote, clock });
  factory.reconfigure(spec({ limit: 10, period: "1s", keyed: { max_keys: config.keys } }));
  const handle = factory.getThrottlerOrThrow("per_customer");
  const empty = heapUsed();
  for (let start = 0; start < config.keys; start += BATCH) {
    for (let i = start; i < Math.min(config.keys, start + BATCH); i++) await handle.forKey(`customer-${i}`).throttle(1);
    await clock.advance(10);
  }
  const used = heapUsed();
  const kept = factory.keyClientCount;
  await clock.advance(80_000); // past the idle time (60 s) and the next sweep (every 15 s): every key's client is dropped
  const after = heapUsed();
  const left = factory.keyClientCount;
  // A handle made before the drop still works: its key's client is made again on its next call.
  await handle.forKey("customer-0").throttle(1);
  factory.close();
  return {
    keys: config.keys,
    keptClients: kept,
    bytesPerKeyUsed: (used - empty) / config.keys,
    clientsLeft: left,
    bytesPerKeyAfterIdle: (after - empty) / config.keys,
  };
}

for (const subject of config.subjects) {
  const run = { controller, "rate-limiter-flexible": rateLimiterFlexible, client }[subject];
  emit({ type: "result", subject, ...(await run()) });
}
process.exit(0);
