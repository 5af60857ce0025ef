// Lag priority under scarce quota: one computation, two partitions, both backlogged; every message
// of partition 0 is older than every message of partition 1. With lag priority the lagging partition
// takes the quota until it has caught up; with a fair split it would take twice as long.
import { BenchChild } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";
import { NOOP_COMPUTATION } from "../lib/specs.ts";

export interface CatchUpFigures {
  /** Seconds from the start until the lagging partition had processed its whole backlog. */
  readonly catchUpS: number[];
  /**
   * What strict lag priority allows: (backlog − half the initial bucket) ÷ limit. The bucket starts
   * full and, while it is positive and nobody waits, grants on arrival whatever the lag: both
   * partitions ask at once, so each takes about half of it before lag order applies.
   */
  readonly idealS: number;
  /** What a fair split without lag priority would take: (2 × backlog − the initial bucket) ÷ limit. */
  readonly fairS: number;
  /** Rows of the leading partition processed meanwhile. */
  readonly leadingRows: number[];
}

export async function measureCatchUp(g: GroupContext): Promise<CatchUpFigures> {
  const reps = g.pick(3, 1);
  const limit = g.pick(500, 1000);
  const backlog = g.pick(2500, 1500);
  const capacity = limit; // period 1 s
  const idealS = (backlog - capacity / 2) / limit;
  const fairS = (2 * backlog - capacity) / limit;
  const out: CatchUpFigures = { catchUpS: [], idealS, fairS, leadingRows: [] };
  g.log(
    `catch-up: ${reps} runs, ${backlog} lagging and ${backlog} leading messages at ${limit}/s (ideal ${formatNumber(idealS)} s, fair split ${formatNumber(fairS)} s)`,
  );
  const now = Date.now();
  const spec = {
    pipeline: "bench-catch-up",
    streams: { input: { topic: "input", partitions: 2 } },
    computations: { Lagged: { module: NOOP_COMPUTATION, inputs: ["input"], max_rows_per_batch: 50 } },
    dynamic_spec: {
      throttlers: { scarce: { limit, period: "1s", request_period: "200ms" } },
      computations: { Lagged: { input_rows_throttler_id: "scarce" } },
    },
  };
  for (let rep = 0; rep < reps; rep++) {
    const controller = BenchChild.start("controller-process.ts", { mode: "sluice", spec });
    const address = String((await controller.waitForType("ready", 30_000))["address"]);
    const worker = BenchChild.start("pipeline-process.ts", {
      spec,
      controller: address,
      logIterations: true,
      finishAtRows: backlog * 2,
      prefill: [
        // an hour behind, 10 ms apart: all older than partition 1's
        { stream: "input", partition: 0, count: backlog, firstTimestampMs: now - 3_600_000, stepMs: 10 },
        { stream: "input", partition: 1, count: backlog, firstTimestampMs: now - 60_000, stepMs: 10 },
      ],
    });
    try {
      const started = await worker.waitForType("started", 60_000);
      await worker.waitForType("finished", ((2 * backlog) / limit) * 1000 * 3 + 30_000);
      const reply = await worker.request({ type: "iterations" });
      const list = reply["list"] as [string, number, number, number, number][];
      let lagging = 0;
      let leading = 0;
      let caughtUpAt = Number.NaN;
      for (const [, partition, at, rows] of list) {
        if (partition === 0) lagging += rows;
        else leading += rows;
        if (partition === 0 && lagging >= backlog) {
          caughtUpAt = at;
          break;
        }
      }
      const seconds = (caughtUpAt - Number(started["startAt"])) / 1000;
      out.catchUpS.push(seconds);
      out.leadingRows.push(leading);
      g.log(`run ${rep + 1}: the lagging partition caught up after ${formatNumber(seconds)} s; the leading one processed ${leading} rows meanwhile`);
    } finally {
      await Promise.all([worker.stop(), controller.stop()]);
    }
  }
  return out;
}
