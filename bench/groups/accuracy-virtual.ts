// The prefetching client against a real Controller in virtual time (ManualClock, in-memory
// transport): minutes of traffic in a second, the same every run for a given seed, no machine noise.
// Measures RPCs per client per request_period in steady state and the largest local pool.
import { ManualClock } from "@sluice/core";
import { Controller } from "@sluice/controller";
import { createInMemoryQuotaClient } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { formatNumber } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";
import { InstrumentedClient } from "../lib/instrumented-client.ts";
import { seededRandom } from "../lib/random.ts";

const CLIENTS = 8;
const REQUEST_PERIOD_MS = 500;
const STEP_MS = 10;

export type Demand = "paced" | "backlogged" | "bursty";

export interface VirtualRun {
  /** RPCs per client per request_period after the warm-up. */
  readonly rpcsPerPeriod: number;
  /** Largest pool of any client ÷ (limit × request_period). */
  readonly maxPool: number;
  readonly maxClaimed: number;
  /** Consumed rate after the warm-up ÷ limit − 1 (binding scenarios). */
  readonly rateError: number;
}

export async function runVirtual(demand: Demand, limit: number, durationMs: number, warmupMs: number, seed: number): Promise<VirtualRun> {
  const random = seededRandom(seed);
  const clock = new ManualClock(0);
  const parsed = validateDynamicSpec({ throttlers: { t: { limit, period: "1s", request_period: `${REQUEST_PERIOD_MS}ms` } }, computations: {} });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const spec = parsed.value.throttlers["t"];
  if (!spec) throw new Error("no throttler t");
  const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock });
  const transport = createInMemoryQuotaClient(controller, { clock });
  const clients = Array.from(
    { length: CLIENTS },
    (_, i) => new InstrumentedClient({ client: () => transport, throttlerId: "t", clientId: `job${i}`, spec, clock }),
  );
  const stop = new AbortController();
  let consumedAfterWarmup = 0;
  let rpcsAtWarmup = 0;
  const loops = clients.map(async (client) => {
    const sleep = (ms: number) => clock.sleep(ms, stop.signal);
    const take = async (amount: number) => {
      await client.throttler.throttle(amount, { signal: stop.signal });
      if (clock.now() >= warmupMs) consumedAfterWarmup += amount;
    };
    try {
      await sleep(Math.floor(random() * 100));
      for (;;) {
        if (demand === "paced") {
          // 100 units/s per client, far below the limit: the steady state of an unthrottled job.
          await take(10);
          await sleep(100);
        } else if (demand === "backlogged") {
          await take(5);
        } else {
          // Idle for up to 2 s, then a burst of 20–200 calls as fast as the quota allows.
          await sleep(Math.floor(random() * 2000));
          const calls = 20 + Math.floor(random() * 180);
          for (let i = 0; i < calls; i++) await take(5);
        }
      }
    } catch {
      // stopped
    }
  });
  while (clock.now() < durationMs) {
    await clock.advance(STEP_MS);
    if (rpcsAtWarmup === 0 && clock.now() >= warmupMs) rpcsAtWarmup = clients.reduce((sum, c) => sum + c.rpcs, 0);
  }
  stop.abort();
  await clock.advance(STEP_MS);
  await Promise.all(loops);
  const rpcs = clients.reduce((sum, c) => sum + c.rpcs, 0) - rpcsAtWarmup;
  const measuredMs = durationMs - warmupMs;
  const bound = (limit * REQUEST_PERIOD_MS) / 1000;
  for (const client of clients) client.throttler.close();
  transport.close();
  controller.close();
  return {
    rpcsPerPeriod: rpcs / CLIENTS / (measuredMs / REQUEST_PERIOD_MS),
    maxPool: Math.max(...clients.map((c) => c.maxAvailable)) / bound,
    maxClaimed: Math.max(...clients.map((c) => c.maxClaimed)) / bound,
    rateError: (consumedAfterWarmup * 1000) / measuredMs / limit - 1,
  };
}

export async function measureVirtual(g: GroupContext): Promise<Map<Demand, VirtualRun[]>> {
  const reps = g.pick(3, 1);
  const durationMs = g.pick(120_000, 20_000);
  const warmupMs = g.pick(20_000, 5_000);
  const scenarios: [Demand, number][] = [
    ["paced", 1_000_000],
    ["backlogged", 1000],
    ["bursty", 1000],
  ];
  const out = new Map<Demand, VirtualRun[]>();
  g.log(`virtual time: ${reps} runs of ${durationMs / 1000} s per demand pattern, ${CLIENTS} clients, request_period ${REQUEST_PERIOD_MS} ms`);
  for (let rep = 0; rep < reps; rep++) {
    for (const [demand, limit] of scenarios) {
      const run = await runVirtual(demand, limit, durationMs, warmupMs, 17 + rep);
      out.set(demand, [...(out.get(demand) ?? []), run]);
      g.log(
        `run ${rep + 1} ${demand} (limit ${limit}/s): ${formatNumber(run.rpcsPerPeriod)} RPCs per client per request_period, largest pool ×${formatNumber(run.maxPool)} of limit × request_period`,
      );
    }
  }
  return out;
}

export const VIRTUAL_CLIENTS = CLIENTS;
export const VIRTUAL_REQUEST_PERIOD_MS = REQUEST_PERIOD_MS;
