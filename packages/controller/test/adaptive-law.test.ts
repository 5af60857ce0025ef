import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decideLimit, initialLawState, type AdaptiveBounds } from "../src/index.ts";
import { ADAPTIVE_LAW } from "../src/adaptive/adaptive-law.ts";
import type { AdaptiveLawState } from "@sluice/failover-ports";

// The control law against a simulated plant, one step per interval (virtual time: no clock is
// needed, the law is a pure function). The plant is seed 004's cluster: work admitted at `limit`
// tasks/s, each costing `cost` CPU-seconds, on `capacity` CPU-seconds/s; its utilisation follows the
// admitted work with a first-order lag (tasks start and finish over time) and is read as the
// average over the interval that just ended, with ±2 % measurement noise, clipped at 1.0 like CPU.

const bounds: AdaptiveBounds = { low: 0.9, high: 0.95, minLimit: 1, maxLimit: 500 };

interface PlantOptions {
  capacity: (step: number) => number;
  demand?: (step: number) => number;
  steps: number;
  initialLimit?: number;
}

interface Trace {
  limits: number[];
  loads: number[];
  /** Demand over capacity before clipping: > 1 is an overload. */
  overloads: number[];
}

function simulate({ capacity, demand = () => Number.POSITIVE_INFINITY, steps, initialLimit = 2 }: PlantOptions): Trace {
  let state: AdaptiveLawState = initialLawState(initialLimit, bounds);
  let utilisation = 0;
  let seed = 7;
  const noise = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return 1 + ((seed / 2 ** 31) * 2 - 1) * 0.02;
  };
  const trace: Trace = { limits: [], loads: [], overloads: [] };
  const substeps = 10;
  for (let step = 0; step < steps; step++) {
    const use = Math.min(state.limit, demand(step));
    const offered = use / capacity(step);
    let sum = 0;
    for (let i = 0; i < substeps; i++) {
      utilisation += (offered - utilisation) * 0.3; // lag: ~1/3 of an interval
      sum += Math.min(1, utilisation);
    }
    const load = Math.min(1, (sum / substeps) * noise());
    trace.limits.push(state.limit);
    trace.loads.push(load);
    trace.overloads.push(offered);
    state = decideLimit(state, { ok: true, load }, { use, queued: demand(step) > state.limit }, bounds).state;
  }
  return trace;
}

const inBand = (load: number) => load >= bounds.low - 0.01 && load <= bounds.high + 0.01;

function firstInBand(loads: readonly number[], from = 0): number {
  for (let i = from; i < loads.length; i++) if (inBand(loads[i] ?? 0)) return i;
  return -1;
}

function shareInBand(loads: readonly number[]): number {
  return loads.filter(inBand).length / loads.length;
}

describe("adaptive control law on a simulated cluster", () => {
  it("slow-starts from initial_limit to the band, then stays there (≥ 80 % of intervals, no oscillation)", () => {
    const trace = simulate({ capacity: () => 40, steps: 60 });
    const reached = firstInBand(trace.loads);
    assert.ok(reached > 0 && reached <= 12, `band reached at interval ${reached}; limits ${trace.limits.join(" ")}`);
    // Slow start: no raise larger than ×1.5 per interval.
    for (let i = 1; i < trace.limits.length; i++) {
      const prev = trace.limits[i - 1] ?? 0;
      assert.ok((trace.limits[i] ?? 0) <= prev * ADAPTIVE_LAW.maxRaise + 0.01, `interval ${i}: ${prev} -> ${trace.limits[i]}`);
    }
    const after = trace.loads.slice(reached);
    assert.ok(shareInBand(after) >= 0.8, `share in band ${shareInBand(after)}; loads ${after.map((l) => l.toFixed(3)).join(" ")}`);
    const overloadedRuns = longestRun(trace.overloads.slice(reached).map((o) => o > 1));
    assert.ok(overloadedRuns <= 1, `overload lasted ${overloadedRuns} intervals`);
  });

  it("after the cluster loses half its capacity, is back in the band within 5 intervals", () => {
    const trace = simulate({ capacity: (step) => (step < 30 ? 40 : 20), steps: 60 });
    const back = firstInBand(trace.loads, 31);
    assert.ok(
      back >= 0 && back - 30 <= 5,
      `back in band ${back - 30} intervals after the loss; loads ${trace.loads
        .slice(28, 40)
        .map((l) => l.toFixed(3))
        .join(" ")}`,
    );
    const overload = longestRun(trace.overloads.slice(30).map((o) => o > 1));
    assert.ok(overload <= 3, `overload lasted ${overload} intervals after the loss`);
    assert.ok(shareInBand(trace.loads.slice(back)) >= 0.8);
  });

  it("does not climb far above what is used when demand is the bottleneck (app-limited)", () => {
    const trace = simulate({ capacity: () => 40, demand: () => 5, steps: 40 });
    const top = Math.max(...trace.limits);
    assert.ok(top <= 5 * ADAPTIVE_LAW.maxRaise + ADAPTIVE_LAW.minRaiseStep + 1e-9, `limit climbed to ${top} with use 5`);
  });

  it("holds on a failed reading and falls back to min_limit after repeated failures", () => {
    let state = initialLawState(30, bounds);
    const failed = { ok: false as const, reason: "Prometheus did not answer" };
    const usage = { use: 30, queued: true };
    const first = decideLimit(state, failed, usage, bounds);
    assert.equal(first.action, "hold");
    assert.equal(first.state.limit, 30);
    state = decideLimit(first.state, failed, usage, bounds).state;
    assert.equal(state.limit, 30);
    const third = decideLimit(state, failed, usage, bounds);
    assert.equal(third.action, "fallback");
    assert.equal(third.state.limit, bounds.minLimit);
    assert.match(third.reason, /3 failed readings in a row \(Prometheus did not answer\)/);
    const recovered = decideLimit(third.state, { ok: true, load: 0.1 }, { use: 1, queued: true }, bounds);
    assert.equal(recovered.action, "raise");
    assert.equal(recovered.state.failures, 0);
  });

  it("never leaves [min_limit, max_limit]", () => {
    const tight: AdaptiveBounds = { ...bounds, minLimit: 3, maxLimit: 10 };
    let state = initialLawState(100, tight);
    assert.equal(state.limit, 10);
    for (let i = 0; i < 10; i++) state = decideLimit(state, { ok: true, load: 0.1 }, { use: 10, queued: true }, tight).state;
    assert.equal(state.limit, 10);
    for (let i = 0; i < 10; i++) state = decideLimit(state, { ok: true, load: 3 }, { use: 10, queued: true }, tight).state;
    assert.equal(state.limit, 3);
  });
});

function longestRun(flags: readonly boolean[]): number {
  let best = 0;
  let run = 0;
  for (const flag of flags) {
    run = flag ? run + 1 : 0;
    best = Math.max(best, run);
  }
  return best;
}

describe("adaptive control law in whole units (concurrency throttlers)", () => {
  const whole: AdaptiveBounds = { ...bounds, wholeUnits: true };
  it("raises to the next whole unit at least, and cuts to a whole unit", () => {
    const raised = decideLimit(initialLawState(15, whole), { ok: true, load: 0.8 }, { use: 15, queued: true }, whole);
    assert.equal(raised.state.limit, 17, "15 × 0.925/0.8 = 17.3: a whole number of tasks");
    const cut = decideLimit(initialLawState(30, whole), { ok: true, load: 0.99 }, { use: 30, queued: true }, whole);
    assert.ok(Number.isInteger(cut.state.limit) && cut.state.limit < 30, `cut to ${cut.state.limit}`);
  });

  it("a saturated reading right after a raise landed in the band cuts to ×0.8; after a hold in the band, it is a loss of capacity: ×0.5", () => {
    const queued = { use: 30, queued: true };
    const raised = decideLimit(initialLawState(20, whole), { ok: true, load: 0.6 }, { use: 20, queued: true }, whole).state;
    assert.equal(raised.limit, 30);
    const landed = decideLimit(raised, { ok: true, load: 0.92 }, queued, whole).state;
    assert.equal(decideLimit(landed, { ok: true, load: 1 }, queued, whole).state.limit, 24, "slow start's last step still starting up: 30 × 0.8");
    const held = decideLimit(landed, { ok: true, load: 0.93 }, queued, whole).state;
    assert.equal(decideLimit(held, { ok: true, load: 1 }, queued, whole).state.limit, 15, "the system changed (lost capacity): 30 × 0.5");
  });

  it("a loss of capacity (a reading beyond the near zone right after a steady one, no raise before it) cuts once to half the use shown, then holds while the readings cannot show the cut or are falling", () => {
    const usage = { use: 60, queued: true };
    const steady = decideLimit(
      decideLimit(initialLawState(60, whole), { ok: true, load: 0.93 }, usage, whole).state,
      { ok: true, load: 0.93 },
      usage,
      whole,
    ).state;
    // A rise into the near zone is as likely noise (a real run read 0.928 → 0.961 with nothing changed): one unit.
    assert.equal(decideLimit(steady, { ok: true, load: 0.964 }, usage, whole).state.limit, 59);
    const lost = decideLimit(steady, { ok: true, load: 0.98 }, usage, whole);
    assert.equal(lost.action, "cut");
    assert.equal(lost.state.limit, 30);
    assert.match(lost.reason, /load 0\.98 above \[0\.9, 0\.95\] right after a steady 0\.93, use 60: the system lost capacity/);
    const lagging = decideLimit(lost.state, { ok: true, load: 1 }, { use: 40, queued: true }, whole);
    assert.equal(lagging.action, "hold", "the first reading after the cut was scraped before it took effect");
    assert.match(lagging.reason, /cannot show the last cut yet/);
    const falling = decideLimit(lagging.state, { ok: true, load: 0.96 }, { use: 30, queued: true }, whole);
    assert.equal(falling.action, "hold", "a falling reading is the cut coming through");
    assert.match(falling.reason, /falling from 1: the last cut is still coming through/);
    const notFalling = decideLimit(falling.state, { ok: true, load: 0.97 }, { use: 30, queued: true }, whole);
    assert.equal(notFalling.action, "cut", "a reading that shows the cut and is not falling any more goes back to the other rules");
    assert.equal(notFalling.state.limit, 29, "just above the band: one unit");
    // From the near zone (a one-unit cut, no raise) the next reading far above is a loss too, cut from the use the reading shows.
    const nearCut = decideLimit(steady, { ok: true, load: 0.964 }, usage, whole).state;
    assert.equal(decideLimit(nearCut, { ok: true, load: 1 }, { use: 59, queued: true }, whole).state.limit, 30);
    // After a raise the same reading is the law's own move still starting up: the proportional cut.
    const raised = decideLimit(initialLawState(40, whole), { ok: true, load: 0.6 }, { use: 40, queued: true }, whole).state;
    assert.equal(raised.limit, 60);
    assert.equal(decideLimit(raised, { ok: true, load: 0.98 }, { use: 60, queued: true }, whole).state.limit, 53, "60 × (0.925 / 0.98)²");
  });

  it("just outside the band, moves one unit: a cut at once, a raise only on the second reading below (one reading's noise is as wide as the band)", () => {
    const usage = { use: 15, queued: true };
    const first = decideLimit(initialLawState(15, whole), { ok: true, load: 0.86 }, usage, whole);
    assert.equal(first.action, "hold");
    assert.match(first.reason, /just below \[0\.9, 0\.95\]: waiting for a second reading/);
    const second = decideLimit(first.state, { ok: true, load: 0.87 }, usage, whole);
    assert.equal(second.state.limit, 16, "one unit, not 15 × 0.925/0.87 rounded");
    const above = decideLimit(second.state, { ok: true, load: 0.97 }, { use: 16, queued: true }, whole);
    assert.equal(above.state.limit, 15, "above the band one unit comes off at once: an overload is the error that hurts");
    const inside = decideLimit(above.state, { ok: true, load: 0.93 }, { use: 15, queued: true }, whole);
    const belowOnce = decideLimit(inside.state, { ok: true, load: 0.88 }, { use: 15, queued: true }, whole);
    assert.equal(belowOnce.action, "hold", "a reading inside the band in between starts over");
    // Rate throttlers: half way in ratio.
    const rate = decideLimit(
      decideLimit(initialLawState(100, bounds), { ok: true, load: 0.88 }, { use: 100, queued: true }, bounds).state,
      { ok: true, load: 0.88 },
      { use: 100, queued: true },
      bounds,
    );
    assert.equal(rate.state.limit, Math.round(100 * Math.sqrt(0.925 / 0.88) * 100) / 100);
  });
  it("with a request waiting, a raise scales the limit, not the instant's use (short of it by the tasks that just ended)", () => {
    const raised = decideLimit(initialLawState(20, whole), { ok: true, load: 0.6 }, { use: 17, queued: true }, whole);
    assert.equal(raised.state.limit, 30, "min(20 × 1.5, 20 × 0.925/0.6) — from the limit 20, not the 17 in use");
    const idle = decideLimit(initialLawState(20, whole), { ok: true, load: 0.6 }, { use: 17, queued: false }, whole);
    assert.equal(idle.state.limit, 26, "nobody waiting: from the use, 17 × 0.925/0.6 = 26.2");
  });

  it("right after a raise, scales the use the lagging reading still shows (the decision before), not the new one", () => {
    const first = decideLimit(initialLawState(32, whole), { ok: true, load: 0.4 }, { use: 32, queued: true }, whole);
    assert.equal(first.state.limit, 48);
    assert.equal(first.state.lastUse, 32);
    const next = decideLimit(first.state, { ok: true, load: 0.6 }, { use: 48, queued: true }, whole);
    assert.equal(next.state.limit, 49, "32 × 0.925/0.6 = 49.3 — scaling 48 would give 74 (×1.5 cap: 72), past a 64-core cluster");
  });

  it("inside the band, two readings in a row near the same edge move one unit towards the middle; one, or readings in the middle, hold", () => {
    const usage = { use: 60, queued: true };
    const once = decideLimit(initialLawState(60, whole), { ok: true, load: 0.905 }, usage, whole);
    assert.equal(once.action, "hold");
    const twice = decideLimit(once.state, { ok: true, load: 0.908 }, usage, whole);
    assert.equal(twice.action, "raise");
    assert.equal(twice.state.limit, 61);
    assert.match(twice.reason, /near its low edge twice in a row/);
    const middle = decideLimit(decideLimit(initialLawState(60, whole), { ok: true, load: 0.92 }, usage, whole).state, { ok: true, load: 0.93 }, usage, whole);
    assert.equal(middle.action, "hold");
    const high = decideLimit(decideLimit(initialLawState(60, whole), { ok: true, load: 0.945 }, usage, whole).state, { ok: true, load: 0.947 }, usage, whole);
    assert.equal(high.state.limit, 59, "near the high edge twice: one unit off");
    const rate = decideLimit(
      decideLimit(initialLawState(60, bounds), { ok: true, load: 0.905 }, usage, bounds).state,
      { ok: true, load: 0.905 },
      usage,
      bounds,
    );
    assert.equal(rate.action, "hold", "rate throttlers hold anywhere in the band");
  });
});
