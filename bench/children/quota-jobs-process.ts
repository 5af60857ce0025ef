// Job-like quota clients in one process (a worker's jobs), each looping `throttle(amount)` as fast
// as the quota allows, against a controller over gRPC. Counts consumption and RPCs inside a window
// set in epoch ms, and the largest local pool each client ever held.
// Events: ready; result {jobs: [{clientId, consumed, rpcs, maxAvailable, maxClaimed}]} at the end.
import { systemClock } from "@sluice/core";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { DynamicSpecWatcher } from "@sluice/client";
import type { DynamicSpec } from "@sluice/spec";
import { configArgument, emit, onCommands } from "../lib/child-io.ts";
import { InstrumentedClient } from "../lib/instrumented-client.ts";

interface Config {
  readonly controller: string;
  readonly throttlerId: string;
  readonly clientIds: readonly string[];
  readonly amount: number;
}

/** Epoch ms, sent once every process is ready: the jobs start together, the window opens and closes, then the jobs stop. */
interface Schedule {
  readonly startAt: number;
  readonly windowFrom: number;
  readonly windowTo: number;
  readonly stopAt: number;
}

const config = configArgument<Config>();
const client = createGrpcQuotaClient(config.controller);
let spec: DynamicSpec | null = null;
const watcher = new DynamicSpecWatcher({ client: () => client, clientId: "bench-jobs", clock: systemClock, onSpec: (next) => (spec = next) });
await watcher.start();
const throttlerSpec = (spec as DynamicSpec | null)?.throttlers[config.throttlerId];
if (!throttlerSpec) throw new Error(`throttler ${config.throttlerId} is not in the controller's dynamic_spec`);

const jobs = config.clientIds.map((clientId) => ({
  clientId,
  instrumented: new InstrumentedClient({ client: () => client, throttlerId: config.throttlerId, clientId, spec: throttlerSpec, clock: systemClock }),
  consumed: 0,
  consumedAtFrom: 0,
  consumedAtTo: 0,
  rpcsAtFrom: 0,
  rpcsAtTo: 0,
}));
const schedule = await new Promise<Schedule>((resolve) => {
  onCommands((command) => {
    if (command.type === "go") resolve(command as unknown as Schedule);
  });
  emit({ type: "ready" });
});

const at = (epochMs: number, work: () => void) => setTimeout(work, Math.max(0, epochMs - Date.now()));
at(schedule.windowFrom, () => {
  for (const job of jobs) {
    job.consumedAtFrom = job.consumed;
    job.rpcsAtFrom = job.instrumented.rpcs;
  }
});
at(schedule.windowTo, () => {
  for (const job of jobs) {
    job.consumedAtTo = job.consumed;
    job.rpcsAtTo = job.instrumented.rpcs;
  }
});

await new Promise((resolve) => setTimeout(resolve, Math.max(0, schedule.startAt - Date.now())));
const stop = new AbortController();
at(schedule.stopAt, () => stop.abort());
await Promise.all(
  jobs.map(async (job) => {
    try {
      while (!stop.signal.aborted) {
        await job.instrumented.throttler.throttle(config.amount, { signal: stop.signal });
        job.consumed += config.amount;
      }
    } catch (error) {
      if (!stop.signal.aborted) throw error;
    }
  }),
);
emit({
  type: "result",
  jobs: jobs.map((job) => ({
    clientId: job.clientId,
    consumed: job.consumedAtTo - job.consumedAtFrom,
    rpcs: job.rpcsAtTo - job.rpcsAtFrom,
    maxAvailable: job.instrumented.maxAvailable,
    maxClaimed: job.instrumented.maxClaimed,
  })),
});
for (const job of jobs) job.instrumented.throttler.close();
await watcher.close();
client.close();
process.exit(0);
