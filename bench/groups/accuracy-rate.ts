// Rate accuracy across real processes: a controller process and two job processes of four jobs each,
// all backlogged on one 1,000/s throttler. From the same runs: RPCs per client per request_period
// while the quota binds, and the largest local pool any client held.
import { BenchChild, type ChildEvent } from "../lib/child.ts";
import { formatNumber, formatPercent } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";
import { controllerSpec } from "../lib/specs.ts";

export const RATE_LIMIT = 1000;
export const REQUEST_PERIOD_MS = 500;
const PROCESSES = 2;
const JOBS_PER_PROCESS = 4;
const AMOUNT = 5;

interface JobResult {
  readonly clientId: string;
  readonly consumed: number;
  readonly rpcs: number;
  readonly maxAvailable: number;
  readonly maxClaimed: number;
}

export interface RateRunFigures {
  readonly windowS: number;
  /** |rate − limit| ÷ limit, per run, as a fraction. */
  readonly consumedError: number[];
  readonly grantedError: number[];
  readonly rpcsPerPeriod: number[];
  /** Largest pool of any client ÷ (limit × request_period), per run. */
  readonly maxPool: number[];
  readonly maxClaimed: number[];
}

export async function measureRateAccuracy(g: GroupContext): Promise<RateRunFigures> {
  const reps = g.pick(3, 1);
  const windowMs = g.pick(30_000, 1_000);
  const warmupMs = g.pick(3_000, 1_000);
  const out: RateRunFigures = { windowS: windowMs / 1000, consumedError: [], grantedError: [], rpcsPerPeriod: [], maxPool: [], maxClaimed: [] };
  g.log(
    `rate: ${reps} runs of ${windowMs / 1000} s at ${RATE_LIMIT}/s, ${PROCESSES * JOBS_PER_PROCESS} jobs in ${PROCESSES} processes (throttle(${AMOUNT}) in a loop)`,
  );
  for (let rep = 0; rep < reps; rep++) {
    const controller = BenchChild.start("controller-process.ts", {
      mode: "sluice",
      spec: controllerSpec({ rate: { limit: RATE_LIMIT, period: "1s", request_period: `${REQUEST_PERIOD_MS}ms` } }),
    });
    const address = String((await controller.waitForType("ready", 30_000))["address"]);
    const processes = Array.from({ length: PROCESSES }, (_, p) =>
      BenchChild.start("quota-jobs-process.ts", {
        controller: address,
        throttlerId: "rate",
        clientIds: Array.from({ length: JOBS_PER_PROCESS }, (_, j) => `p${p}/job${j}`),
        amount: AMOUNT,
      }),
    );
    try {
      await Promise.all(processes.map((child) => child.waitForType("ready", 30_000)));
      const startAt = Date.now() + 300;
      const windowFrom = startAt + warmupMs;
      const windowTo = windowFrom + windowMs;
      for (const child of processes) child.send({ type: "go", startAt, windowFrom, windowTo, stopAt: windowTo + 500 });
      await sleepUntil(windowFrom);
      const before = await granted(controller);
      await sleepUntil(windowTo);
      const after = await granted(controller);
      const results = await Promise.all(processes.map((child) => child.waitForType("result", 30_000)));
      const jobs = results.flatMap((event) => event["jobs"] as JobResult[]);
      const consumed = jobs.reduce((sum, job) => sum + job.consumed, 0);
      const rate = (consumed * 1000) / windowMs;
      const grantedRate = ((after.granted - before.granted) * 1000) / (after.at - before.at);
      const rpcs = jobs.reduce((sum, job) => sum + job.rpcs, 0) / jobs.length / (windowMs / REQUEST_PERIOD_MS);
      const bound = RATE_LIMIT * (REQUEST_PERIOD_MS / 1000);
      out.consumedError.push(Math.abs(rate - RATE_LIMIT) / RATE_LIMIT);
      out.grantedError.push(Math.abs(grantedRate - RATE_LIMIT) / RATE_LIMIT);
      out.rpcsPerPeriod.push(rpcs);
      out.maxPool.push(Math.max(...jobs.map((job) => job.maxAvailable)) / bound);
      out.maxClaimed.push(Math.max(...jobs.map((job) => job.maxClaimed)) / bound);
      g.log(
        `run ${rep + 1}: consumed ${formatNumber(rate)}/s (error ${formatPercent(out.consumedError.at(-1) ?? NaN)}), granted ${formatNumber(grantedRate)}/s, ` +
          `${formatNumber(rpcs)} RPCs per client per request_period, largest pool ${formatNumber(Math.max(...jobs.map((job) => job.maxAvailable)))} units (bound ${bound})`,
      );
    } finally {
      await Promise.all([...processes, controller].map((child) => child.stop()));
    }
  }
  return out;
}

async function granted(controller: BenchChild): Promise<{ granted: number; at: number }> {
  const reply: ChildEvent = await controller.request({ type: "describe" });
  const at = Date.now();
  const snapshot = JSON.parse(String(reply["snapshotJson"])) as { throttlers: { id: string; counters: { granted: number } }[] };
  return { granted: snapshot.throttlers.find((t) => t.id === "rate")?.counters.granted ?? Number.NaN, at };
}

function sleepUntil(epochMs: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, epochMs - Date.now())));
}
