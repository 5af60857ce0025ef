// What one Process iteration pays for its Input.Throttle when the quota does not bind (issue #14:
// "two resolved promises and a span"): the job's own InputThrottle over the rows and bytes handles
// of a DistributedThrottlerFactory whose pools were filled, with the global (no-op) tracer as a
// worker without a tracing SDK has. Batches of 10 iterations, as a 1,000-record delivery split by
// max_rows_per_batch 100. Against two awaited `Promise.resolve()`.
import { systemClock } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import { SharedLinks } from "../../packages/runtime/src/job/shared-links.ts";
import { BatchWaits, InputThrottle } from "../../packages/runtime/src/job/input-throttle.ts";
import { ComputationStats } from "../../packages/runtime/src/job/computation-stats.ts";
import { DistributedThrottlerFactory } from "@sluice/client";
import { validateDynamicSpec } from "@sluice/spec";
import { formatNumber } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";

const ITERATIONS_PER_BATCH = 10;
const BASELINE = "baseline: two awaited Promise.resolve()";
const POOL = 1_000_000_000;
const UNITS = 100;

export async function measureInputThrottle(g: GroupContext): Promise<void> {
  const reps = g.pick(7, 1);
  const iterations = g.pick(200_000, 5_000);
  if ((reps + 1) * iterations * UNITS >= POOL) throw new Error("input-throttle bench: the pools would run dry");
  let rpcs = 0;
  const parsed = validateDynamicSpec({
    throttlers: { rows: {}, bytes: {} },
    computations: { Bench: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } },
  });
  if (!parsed.ok) throw new Error(`bench spec invalid: ${JSON.stringify(parsed.issues)}`);
  const spec = parsed.value;
  const factory = new DistributedThrottlerFactory({
    computation: "Bench",
    clientId: "bench/Bench/0",
    clock: systemClock,
    client: (): QuotaServiceClient => {
      rpcs += 1;
      throw new Error("Input.Throttle from filled pools must not reach the controller");
    },
  });
  factory.reconfigure(spec);
  // Exactly the bound of an unlimited throttler's pool (1e9 units): more would go back to the
  // controller at once. 100 + 100 units per iteration never empty it within the group.
  factory.getThrottlerOrThrow("rows").release(POOL);
  factory.getThrottlerOrThrow("bytes").release(POOL);
  const input = new InputThrottle({
    computationName: "Bench",
    throttlers: factory,
    dynamicSpec: () => spec,
    clock: systemClock,
    stats: new ComputationStats("Bench"),
  });
  const job = new AbortController();
  const source = new AbortController();
  const batchLinks = new SharedLinks(job.signal);
  const giveUpLinks = new SharedLinks(job.signal);

  const sluice = async (n: number) => {
    for (let done = 0; done < n; done += ITERATIONS_PER_BATCH) {
      const link = batchLinks.enter(source.signal);
      const waits = new BatchWaits(link.signal, source.signal, giveUpLinks);
      for (let i = 0; i < ITERATIONS_PER_BATCH; i++) {
        const answer = input.acquire(UNITS, UNITS, waits);
        const giveBack = typeof answer === "function" ? answer : await answer;
        giveBack();
      }
      waits.dispose();
      batchLinks.leave(link);
    }
  };
  const baseline = async (n: number) => {
    for (let i = 0; i < n; i++) {
      await Promise.resolve();
      await Promise.resolve();
    }
  };
  const runs = new Map<string, number[]>([
    ["Sluice", []],
    [BASELINE, []],
  ]);
  await sluice(iterations / 10);
  await baseline(iterations / 10);
  for (let rep = 0; rep < reps; rep++) {
    for (const [name, work] of rep % 2 === 0
      ? ([
          ["Sluice", sluice],
          [BASELINE, baseline],
        ] as const)
      : ([
          [BASELINE, baseline],
          ["Sluice", sluice],
        ] as const)) {
      const startedAt = process.hrtime.bigint();
      await work(iterations);
      runs.get(name)?.push(Number(process.hrtime.bigint() - startedAt) / 1000 / iterations);
    }
  }
  const rpcsWhileTimed = rpcs; // close() below gives the pools back: that one is expected
  batchLinks.close();
  giveUpLinks.close();
  factory.close();
  if (rpcsWhileTimed > 0) g.note(`Input.Throttle reached the controller ${rpcsWhileTimed} times: the filled pools should have answered every call`);
  const figure = g.add({
    id: "local.input_throttle",
    label: "Input.Throttle of one iteration, unlimited rows + bytes (pools filled)",
    unit: "µs/iteration",
    better: "lower",
    sluice: runs.get("Sluice") ?? null,
    peers: { [BASELINE]: runs.get(BASELINE) ?? [] },
    note: `the job's InputThrottle (runtime/src/job/input-throttle.ts): the Input.Throttle span from the global no-op tracer, its attributes, rows and bytes handles answering from their pools; ${ITERATIONS_PER_BATCH} iterations per delivered batch`,
  });
  g.log(
    `Input.Throttle per iteration: ${formatNumber(figure.sluice?.median ?? NaN)} µs (${BASELINE}: ${formatNumber(figure.peers[BASELINE]?.value.median ?? NaN)} µs)`,
  );
}
