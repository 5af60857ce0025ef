// The adaptive control law (packages/controller/src/adaptive/adaptive-law.ts) on seed 004's cluster
// in virtual time: whole tasks from examples/cluster-admission/tasks.ts (1–3 cores, 0.2–2 s) on 64
// cores, a backlog that always waits, CPU read as Prometheus would answer the example's query
// (utilisation averaged over the last second, scraped every second, avg_over_time over 4 s), one
// decision every 2 s. Deterministic (the tasks are a function of their index), so the figures are
// the same on every run and machine; 8 runs of 240 s, each starting at a different task index.
//
// Units: the example's tasks take one unit per core they ask (examples/cluster-admission/admitter.ts).
// With one unit per task (the example before) the load depends on the task mix the limit happens to
// admit: one reading's noise is about as wide as the band, and even the best fixed number of tasks
// (32) read inside [0.90, 0.95] only ~58 % of the time (the law: 42 %) — measured below. Counted in
// cores, the load follows the limit: the law reads inside the band ≥ 80 % of the time after reaching it.
//
//   pnpm test test/simulation/adaptive-law-cluster-sim.test.ts      (about 4 s)
import assert from "node:assert/strict";
import { test } from "node:test";
import { decideLimit, initialLawState, type AdaptiveBounds } from "@sluice/controller";
import type { AdaptiveLawState } from "@sluice/failover-ports";
import { taskAt } from "../../examples/cluster-admission/tasks.ts";

const TICK_MS = 50;
/**
 * How much older the newest scrape a reading sees is than the decision: Prometheus scrapes every
 * second and the loop's query lands anywhere in between, and the cluster's own figure is a mean
 * over the second before the scrape. One second: the real runs' slow start overshot the band as
 * this model does with it, and did not as it does without it.
 */
const READING_LAG_MS = 1_000;
const CORES = 64;
const bounds: AdaptiveBounds = { low: 0.9, high: 0.95, minLimit: 3, maxLimit: 200, wholeUnits: true };
/** The example's units: a task takes as many units as it asks cores ("cores"), or one unit ("tasks", before). */
type Units = "cores" | "tasks";

interface Run {
  readonly readings: { at: number; load: number; limit: number }[];
  /** Longest stretch with the tasks asking more cores than the cluster has, ms. */
  readonly longestOverloadMs: number;
  /** Per tick: whether the tasks asked more cores than the cluster has. */
  readonly overloaded: boolean[];
}

/** One run of `seconds`; `fixedLimit` replaces the law (for the noise ceiling). */
function run(seconds: number, firstTask: number, fixedLimit?: number, halveAtS?: number, units: Units = "cores"): Run {
  let state: AdaptiveLawState = initialLawState(units === "cores" ? 4 : 2, bounds);
  const inUse = () => (units === "cores" ? tasks.reduce((sum, task) => sum + task.cores, 0) : tasks.length);
  const tasks: { cores: number; remaining: number }[] = [];
  let next = firstTask;
  const busy: number[] = [];
  const scrapes: { at: number; value: number }[] = [];
  const readings: Run["readings"] = [];
  let overloadMs = 0;
  let longestOverloadMs = 0;
  const overloaded: boolean[] = [];
  let cores = CORES;
  for (let t = 0; t < seconds * 1000; t += TICK_MS) {
    if (t === Math.round((halveAtS ?? -1) * 1000)) cores = CORES / 2;
    const limit = fixedLimit ?? state.limit;
    // The backlog's next task starts when its units fit under the limit (first come, first served).
    for (let task = taskAt(next); inUse() + (units === "cores" ? task.cores : 1) <= limit; task = taskAt(next)) {
      next++;
      tasks.push({ cores: task.cores, remaining: task.work });
    }
    // The example's cluster: beyond capacity every core also loses part of its work (thrash 0.5).
    const demand = tasks.reduce((sum, task) => sum + task.cores, 0) / cores;
    const speed = demand > 1 ? 1 / demand / (1 + 0.5 * (demand - 1)) : 1;
    for (const task of tasks) task.remaining -= task.cores * speed * (TICK_MS / 1000);
    for (let i = tasks.length - 1; i >= 0; i--) if ((tasks[i]?.remaining ?? 0) <= 0) tasks.splice(i, 1);
    busy.push(Math.min(1, demand));
    overloadMs = demand > 1 ? overloadMs + TICK_MS : 0;
    overloaded.push(demand > 1);
    longestOverloadMs = Math.max(longestOverloadMs, overloadMs);
    if (t % 1_000 === 0) {
      const lastSecond = busy.slice(-1_000 / TICK_MS);
      scrapes.push({ at: t, value: lastSecond.reduce((a, b) => a + b, 0) / lastSecond.length });
    }
    if (t > 0 && t % 2_000 === 0) {
      const window = scrapes.filter((s) => s.at > t - 4_000 - READING_LAG_MS && s.at <= t - READING_LAG_MS);
      const load = window.reduce((a, s) => a + s.value, 0) / window.length;
      readings.push({ at: t, load, limit });
      state = decideLimit(state, { ok: true, load }, { use: inUse(), queued: true }, bounds).state;
    }
  }
  return { readings, longestOverloadMs, overloaded };
}

const inside = (load: number) => load >= bounds.low && load <= bounds.high;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const pct = (xs: number[]) => xs.map((x) => `${Math.round(x * 100)}`).join(" ");

/** Share of readings inside the band after the first one inside it, and when that was (s). */
function steadyShare(readings: Run["readings"]): { share: number; reachedS: number } {
  const reached = readings.findIndex((r) => inside(r.load));
  if (reached < 0) return { share: 0, reachedS: Number.POSITIVE_INFINITY };
  const steady = readings.slice(reached + 1);
  return { share: steady.filter((r) => inside(r.load)).length / steady.length, reachedS: (readings[reached]?.at ?? 0) / 1000 };
}

test("on seed 004's cluster in virtual time the law reaches the band within 40 s and then reads inside it at least 80 % of the time in every run", (t) => {
  const shares: number[] = [];
  const reachedS: number[] = [];
  const overloads: number[] = [];
  for (let i = 0; i < 8; i++) {
    const { readings, longestOverloadMs } = run(240, i * 100_000);
    const { share, reachedS: at } = steadyShare(readings);
    shares.push(share);
    reachedS.push(at);
    overloads.push(longestOverloadMs);
  }
  t.diagnostic(
    `in band: ${pct(shares)} % (mean ${Math.round(mean(shares) * 100)} %); band reached at ${reachedS.join(" ")} s; longest overload ${overloads.join(" ")} ms`,
  );
  assert.ok(Math.max(...reachedS) <= 40, `band reached at ${reachedS.join(" ")} s`);
  assert.ok(Math.min(...shares) >= 0.8, `share in band after reaching it: ${pct(shares)} %`);
  // No overload lasting longer than one interval (2 s), as the e2e test asserts on the real cluster.
  assert.ok(Math.max(...overloads) <= 2_000, `longest overload ${Math.max(...overloads)} ms`);
});

test("with one unit per task instead of per core, no limit holds the band: the best fixed number of tasks reads inside it well under 80 % of the time", (t) => {
  const law = Array.from({ length: 8 }, (_, i) => steadyShare(run(240, i * 100_000, undefined, undefined, "tasks").readings).share);
  let best = { limit: 0, share: 0 };
  for (let limit = 26; limit <= 38; limit++) {
    const share = steadyShare(run(240, 0, limit, undefined, "tasks").readings.slice(10)).share;
    if (share > best.share) best = { limit, share };
  }
  t.diagnostic(
    `one unit per task: the law ${pct(law)} % in band (mean ${Math.round(mean(law) * 100)} %); best fixed limit ${best.limit}: ${Math.round(best.share * 100)} %`,
  );
  assert.ok(best.share < 0.7, `the best fixed number of tasks reads ${Math.round(best.share * 100)} % in band`);
});

// A loss that falls between two decisions shows first in a reading just above the band (0.956–0.964
// here), which the law treats as noise (one unit off): a real run read 0.928 → 0.961 with nothing
// changed, and a rule that took such a rise for a loss halved the limit there. The loss cut then
// comes one reading later: inside after up to 5.75 intervals from the loss — 5 from the first
// decision after it.
test("on seed 004's cluster in virtual time, after the cluster loses half its cores the load is strictly inside the band within 5 intervals when the loss falls at a decision, within 6 wherever it falls", (t) => {
  const rows: string[] = [];
  const worst: { lossS: number; intervals: number }[] = [];
  const sharesAfter: number[] = [];
  // The loss at a decision and 0.5, 1 and 1.5 s after one: where the loss falls in the interval
  // decides which reading first shows it (the e2e test loses capacity at an arbitrary moment).
  for (const lossS of [120, 120.5, 121, 121.5]) {
    const intervals: number[] = [];
    const overloads: number[] = [];
    for (let i = 0; i < 8; i++) {
      const { readings, overloaded } = run(240, i * 100_000, undefined, lossS);
      const lossMs = lossS * 1000;
      // As the e2e test counts: from the loss to the first reading inside the band after the first above it.
      const seen = readings.findIndex((r) => r.at > lossMs && r.load > bounds.high);
      const rest = readings.slice(seen + 1);
      const back = seen < 0 ? -1 : rest.findIndex((r) => inside(r.load));
      const backAt = rest[back]?.at;
      intervals.push(backAt === undefined ? Number.POSITIVE_INFINITY : (backAt - lossMs) / 2_000);
      const later = rest.slice(back + 1);
      sharesAfter.push(later.filter((r) => inside(r.load)).length / later.length);
      let stretch = 0;
      let longest = 0;
      for (const over of overloaded.slice(lossMs / TICK_MS)) {
        stretch = over ? stretch + TICK_MS : 0;
        longest = Math.max(longest, stretch);
      }
      overloads.push(longest);
    }
    worst.push({ lossS, intervals: Math.max(...intervals) });
    rows.push(`loss at ${lossS} s: inside after ${intervals.join(" ")} intervals, overload after the loss ${overloads.join(" ")} ms`);
  }
  t.diagnostic(`${rows.join("; ")}; in band afterwards ${pct(sharesAfter)} %`);
  const show = worst.map((w) => `${w.intervals} (loss at ${w.lossS} s)`).join(", ");
  assert.ok(
    worst.every((w) => w.intervals <= (w.lossS === 120 ? 5 : 6)),
    `inside the band only after ${show} intervals (worst per loss moment)`,
  );
  assert.ok(Math.min(...sharesAfter) >= 0.8, `in band after getting back: ${pct(sharesAfter)} %`);
});

test("against a fixed limit set to what the band needs at the start (a peer's static configuration): the fixed one holds the band until the cluster loses half its cores, then overloads it for good", (t) => {
  const share = (readings: Run["readings"], from: number, to: number) => {
    const some = readings.filter((r) => r.at >= from && r.at < to);
    return some.filter((r) => inside(r.load)).length / some.length;
  };
  const overloadShare = (overloaded: boolean[], fromMs: number) => {
    const some = overloaded.slice(fromMs / TICK_MS);
    return some.filter(Boolean).length / some.length;
  };
  const rows: string[] = [];
  const figures: Record<string, { before: number; after: number; overloadAfter: number }> = {};
  for (const [name, fixed] of [
    ["adaptive", undefined],
    ["fixed 59", 59],
  ] as const) {
    const runs = Array.from({ length: 4 }, (_, i) => run(240, i * 100_000, fixed, 120));
    const meanOf = (f: (r: Run) => number) => runs.reduce((a, r) => a + f(r), 0) / runs.length;
    const before = meanOf((r) => share(r.readings, 40_000, 120_000));
    const after = meanOf((r) => share(r.readings, 140_000, 240_000));
    const overloadAfter = meanOf((r) => overloadShare(r.overloaded, 140_000));
    figures[name] = { before, after, overloadAfter };
    rows.push(
      `${name}: in band ${Math.round(before * 100)} % before the loss, ${Math.round(after * 100)} % after; overloaded ${Math.round(overloadAfter * 100)} % of the time after`,
    );
  }
  t.diagnostic(rows.join("; "));
  const adaptive = figures["adaptive"];
  const fixed = figures["fixed 59"];
  assert.ok(adaptive && fixed);
  assert.ok(fixed.after === 0 && fixed.overloadAfter > 0.9, "a fixed limit cannot follow the cluster: it overloads it for good");
  assert.ok(adaptive.after >= 0.6 && adaptive.overloadAfter < 0.1, `adaptive after the loss: ${JSON.stringify(adaptive)}`);
});
