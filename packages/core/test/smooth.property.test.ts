// slow: started first on a fresh clone (scripts/run-test-files.mjs)
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { SMOOTH_RATE_FRACTION, paceReachMs, slotExpiryMs } from "../src/index.ts";
import {
  MAX_DELAY_MS,
  MAX_LATE_TIMER_FOR_UTILISATION_MS,
  PERIOD_MS,
  REQUEST_PERIOD_MS,
  SLOW_ANSWER_MS,
  boundFor,
  run,
  type Scenario,
} from "./smooth-scenario.ts";

/**
 * The seed of every property here. `pnpm test` runs a fixed, reproducible sample (a red CI run is
 * then the code's doing, not the draw's); `SMOOTH_SEED=random` explores new cases and prints the
 * seed of any failure, and `SMOOTH_SEED=<n>` replays one. A failing seed found by exploring goes
 * in as a regression case below, shrunk.
 */
function propertySeed(): { seed?: number } {
  const chosen = process.env["SMOOTH_SEED"];
  if (chosen === "random") return {};
  return { seed: chosen ? Number(chosen) : 424242 };
}

// docs/design.md §11.1 in virtual time: many clients, each with its own RPC latencies, share one smooth
// throttler through real QuotaBucketDrivers and PacedThrottlers, while the limit is reconfigured
// and the controller restarts, and while their timers fire late (event-loop stalls). Over the whole
// run no closed window of `period` holds more than `limit × period` units handed to callers, and a
// backlogged throttler delivers ≥ 95 % of limit (with timers up to 15 ms late; later ones lose slots).

const scenario: fc.Arbitrary<Scenario> = fc.integer({ min: 1, max: 20 }).chain((count) =>
  fc.record({
    clients: fc.array(
      fc.record({
        callers: fc.integer({ min: 1, max: 3 }),
        thinkMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 })),
        burstEveryMs: fc.option(fc.integer({ min: 500, max: 4_000 }), { nil: null }),
      }),
      { minLength: count, maxLength: count },
    ),
    latencies: fc.array(fc.record({ requestMs: fc.integer({ min: 0, max: MAX_DELAY_MS }), responseMs: fc.integer({ min: 0, max: MAX_DELAY_MS }) }), {
      minLength: count,
      maxLength: count,
    }),
    responseBaseMs: fc.integer({ min: 0, max: MAX_DELAY_MS }),
    jitterMs: fc.integer({ min: 0, max: MAX_DELAY_MS }),
    stalls: fc.boolean(),
    timerLateMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: MAX_LATE_TIMER_FOR_UTILISATION_MS }), fc.integer({ min: 16, max: 120 })),
    limits: fc.array(fc.record({ atMs: fc.integer({ min: 2_000, max: 28_000 }), limit: fc.integer({ min: 2, max: 120 }) }), {
      minLength: 1,
      maxLength: 4,
    }),
    restart: fc.record({ atMs: fc.integer({ min: 5_000, max: 25_000 }), downMs: fc.integer({ min: 0, max: 1_500 }) }),
    runMs: fc.constant(30_000),
    seed: fc.integer(),
    allBacklogged: fc.boolean(),
  }),
);

/** Every client backlogged, every answer on time, every client's timers late by up to 1–15 ms at random. */
const lateTimerScenario: fc.Arbitrary<Scenario> = fc
  .tuple(scenario, fc.integer({ min: 1, max: MAX_LATE_TIMER_FOR_UTILISATION_MS }))
  .map(([s, timerLateMs]) => ({ ...s, allBacklogged: true, stalls: false, timerLateMs }));

/**
 * Seed 003's own rates (issue 20): limits of 1–20/s, one to three clients, every one backlogged,
 * callers that work up to 20 ms between units (a call of the protected system), answers that come
 * back up to 40 ms late at random over fast legs of 0–2 ms (a loaded machine's round trips: the
 * clients bound the controller's clock from the fastest legs, so slow answers do not cost their
 * slots), timers on time or up to 15 ms late (answers then on time: the expiry is the timers').
 */
const lowLimitScenario: fc.Arbitrary<Scenario> = fc
  .tuple(
    scenario,
    fc.integer({ min: 1, max: 20 }),
    fc.array(fc.record({ atMs: fc.integer({ min: 2_000, max: 28_000 }), limit: fc.integer({ min: 1, max: 20 }) }), { minLength: 0, maxLength: 2 }),
    fc.integer({ min: 1, max: 3 }),
    fc.array(fc.record({ requestMs: fc.integer({ min: 0, max: 2 }), responseMs: fc.integer({ min: 0, max: 2 }) }), { minLength: 3, maxLength: 3 }),
    fc.integer({ min: 0, max: 20 }),
    fc.integer({ min: 0, max: SLOW_ANSWER_MS }),
  )
  .map(([s, initialLimit, limits, count, latencies, workMs, jitterMs]) => ({
    ...s,
    clients: s.clients
      .slice(0, count)
      .concat(Array.from({ length: Math.max(0, count - s.clients.length) }, () => ({ callers: 1, thinkMs: 0, burstEveryMs: null }))),
    latencies,
    responseBaseMs: 0,
    jitterMs,
    allBacklogged: true,
    stalls: false,
    timerLateMs: Math.min(s.timerLateMs, MAX_LATE_TIMER_FOR_UTILISATION_MS),
    initialLimit,
    limits,
    workMs,
  }));

describe("smooth throttler, in virtual time (docs/design.md §11.1)", () => {
  it("seed 003's rates: limits 1–20/s, 1–3 backlogged clients, slow answers: the bound holds and ≥ 95 % is delivered", async () => {
    await fc.assert(
      fc.asyncProperty(lowLimitScenario, async (s) => check(s)),
      {
        verbose: 1,
        numRuns: Number(process.env["SMOOTH_RUNS"] ?? 15),
        timeout: 60_000,
        ...propertySeed(),
        ...(process.env["SMOOTH_PATH"] ? { path: process.env["SMOOTH_PATH"] } : {}),
      },
    );
  });

  it("event-loop stalls: with every client's timers late by random amounts, the bound holds and a backlogged throttler still delivers ≥ 95 %", async () => {
    await fc.assert(
      fc.asyncProperty(lateTimerScenario, async (s) => check(s)),
      {
        verbose: 1,
        numRuns: Number(process.env["SMOOTH_RUNS"] ?? 10),
        timeout: 60_000,
        ...propertySeed(),
        ...(process.env["SMOOTH_PATH"] ? { path: process.env["SMOOTH_PATH"] } : {}),
      },
    );
  });

  it("no closed window of period holds more than limit × period units; a backlogged throttler delivers ≥ 95 % of limit", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => check(s)),
      {
        verbose: 1,
        numRuns: Number(process.env["SMOOTH_RUNS"] ?? 25),
        // A run takes well under a second of real time; one that does not is a livelock in virtual time.
        timeout: 60_000,
        ...propertySeed(),
        ...(process.env["SMOOTH_PATH"] ? { path: process.env["SMOOTH_PATH"] } : {}),
      },
    );
  });

  it("limit 10 → 2 with requests in flight, then a restart: no answer reaches past the new controller's start (SMOOTH_SEED=-975931784, shrunk)", async () => {
    // Requests of up to 5 units asked for at limit 10 were answered at limit 2 as runs of 5 slots
    // 521 ms apart, 2.6 s long. A controller started at 5 s counts on no predecessor's slot lying
    // further ahead than one answer of the limit in force (645.8 ms), and its first slot, 208 ms
    // after such a run's last, put 3 units in the closed window [4917, 5917] ms at limit 2. Such a
    // request is now answered in part (one answer of the new limit), and the client asks again.
    const c = (callers: number, thinkMs: number) => ({ callers, thinkMs, burstEveryMs: null });
    const s: Scenario = {
      clients: [
        c(3, 1),
        c(1, 1),
        c(1, 1),
        c(2, 0),
        c(1, 0),
        c(1, 1),
        c(1, 1),
        c(2, 0),
        c(2, 0),
        c(1, 0),
        c(2, 0),
        c(1, 1),
        c(1, 0),
        c(3, 1),
        c(3, 1),
        c(2, 0),
        c(1, 0),
      ],
      latencies: [1, 0, 2, 0, 2, 2, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0].map((requestMs, i) => ({ requestMs, responseMs: i === 2 ? 1 : 0 })),
      responseBaseMs: 0,
      jitterMs: 0,
      stalls: false,
      timerLateMs: 1,
      limits: [{ atMs: 3_125, limit: 2 }],
      restart: { atMs: 5_000, downMs: 0 },
      runMs: 30_000,
      seed: 0,
      allBacklogged: true,
    };
    const { handedAt, timeline, events } = await run(s);
    verify(s, handedAt, timeline, events);
  });

  it("limit 2 after two reconfigurations at one instant and a restart: no slot lost, 95 % in whole units (SMOOTH_SEED=13825265, shrunk)", async () => {
    // Read 93.5 % (46 of 49.2) when the capacity was counted in fractions of a unit: the hand-outs
    // were a perfect grid, and the spans' edges cut it where 46 whole units was all there was.
    const backlogged = { callers: 1, thinkMs: 0, burstEveryMs: null };
    const s: Scenario = {
      clients: [backlogged, backlogged, backlogged, backlogged, backlogged],
      latencies: Array.from({ length: 5 }, () => ({ requestMs: 0, responseMs: 0 })),
      responseBaseMs: 0,
      jitterMs: 0,
      stalls: false,
      timerLateMs: 1,
      limits: [
        { atMs: 2_000, limit: 9 },
        { atMs: 2_000, limit: 2 },
      ],
      restart: { atMs: 5_000, downMs: 0 },
      runMs: 30_000,
      seed: -352755256,
      allBacklogged: true,
    };
    const { handedAt, timeline, events } = await run(s);
    verify(s, handedAt, timeline, events);
    // At limit 2 every hand-out is one slot after the one before (each lies within the slot expiry
    // after its slot), from a reach after the reconfiguration on; across the restart the new
    // controller's first slot is one reach after it starts (its predecessor's slots may reach that far).
    const intervalMs = 1000 / (2 * SMOOTH_RATE_FRACTION);
    const reachMs = paceReachMs({ limit: 2, requestPeriodMs: REQUEST_PERIOD_MS });
    const toleranceMs = slotExpiryMs(PERIOD_MS);
    const steady = handedAt.filter((t) => t >= 2_000 + reachMs + REQUEST_PERIOD_MS);
    assert.ok(steady.length >= 40, `${steady.length} hand-outs at limit 2`);
    for (let i = 1; i < steady.length; i++) {
      const before = steady[i - 1] ?? 0;
      const at = steady[i] ?? 0;
      if (before < s.restart.atMs && at > s.restart.atMs) {
        assert.ok(
          at <= s.restart.atMs + reachMs + toleranceMs,
          `first hand-out after the restart at ${at.toFixed(1)} ms, ${(at - s.restart.atMs).toFixed(1)} ms after it: more than one reach (${reachMs.toFixed(1)} ms)`,
        );
      } else {
        assert.ok(
          Math.abs(at - before - intervalMs) <= toleranceMs,
          `hand-outs at ${before.toFixed(1)} and ${at.toFixed(1)} ms: ${(at - before).toFixed(1)} ms apart, one slot is ${intervalMs.toFixed(1)} ms`,
        );
      }
    }
  });
});

async function check(s: Scenario): Promise<void> {
  const { handedAt, timeline, events } = await run(s);
  if (process.env["SMOOTH_DEBUG"]) console.log(s.clients.length, handedAt.length, JSON.stringify(timeline), JSON.stringify(s.restart));
  try {
    verify(s, handedAt, timeline, events);
  } catch (error) {
    if (process.env["SMOOTH_DEBUG"]) console.log(String(error));
    throw error;
  }
}

function verify(s: Scenario, handedAt: number[], timeline: readonly { atMs: number; limit: number }[], events: readonly number[]): void {
  handedAt.sort((a, b) => a - b);
  const largestReach = Math.max(...timeline.map((t) => paceReachMs({ limit: t.limit, requestPeriodMs: REQUEST_PERIOD_MS })));

  // Every closed window [t, t + period] starting at a hand-out (the fullest windows do).
  let j = 0;
  for (let i = 0; i < handedAt.length; i++) {
    const from = handedAt[i] ?? 0;
    while (j < handedAt.length && (handedAt[j] ?? 0) <= from + PERIOD_MS) j++;
    const count = j - i;
    const bound = (boundFor(timeline, from - largestReach, from + PERIOD_MS) * PERIOD_MS) / 1000;
    assert.ok(count <= bound, `${count} units in the closed window [${from}, ${from + PERIOD_MS}] ms, limit × period = ${bound}`);
  }

  // Utilisation: the steady spans, away from the start, a limit change or the restart.
  const settleMs = largestReach + 2 * REQUEST_PERIOD_MS;
  const marks = [...events, s.runMs].sort((a, b) => a - b);
  let delivered = 0;
  let capacity = 0;
  /**
   * 95 % of each span's capacity in whole units, rounded down. A span of length L holds a whole
   * number of slots, ⌊L × r⌋ or ⌊L × r⌋ + 1 depending on where the slot grid (1/r apart) falls
   * against its edges: up to one unit per span that no throttler can deliver. At limit 2 that
   * unit is half a second, more than the 1 % between the paced 96 % and the promised 95 % over
   * a span of 1.3 s (2 of 2.6 units) or of 23.3 s (44 of 46.6): a perfect grid read 93.5 %
   * there (46 of 49.2; the regression test below). A perfect grid always holds
   * ⌊0.96 c⌋ ≥ ⌊0.95 c⌋ units in a span of capacity c, so this forgives the rounding and
   * nothing else: a lost unit still fails.
   */
  let required = 0;
  for (let k = 0; k + 1 < marks.length; k++) {
    const from = (marks[k] ?? 0) + settleMs;
    const to = marks[k + 1] ?? 0;
    if (to - from < 1_000) continue;
    delivered += handedAt.filter((t) => t >= from && t < to).length;
    const spanCapacity = (boundFor(timeline, from, from) * (to - from)) / 1000;
    capacity += spanCapacity;
    required += Math.floor(0.95 * spanCapacity + 1e-9);
  }
  // Clients that pause waste the rest of the run they hold (docs/internals/smooth-shaping.md): the 95 % is a
  // promise for a backlog, so it is checked when every client has one.
  // Stalled answers lose the slots their lateness used up: the bound holds, the 95 % is not promised.
  // Timers late by more than the allowance lose slots too (the bound holds; docs/internals/smooth-shaping.md).
  if (capacity > 0 && s.allBacklogged && !s.stalls && s.timerLateMs <= MAX_LATE_TIMER_FOR_UTILISATION_MS) {
    const utilisation = delivered / capacity;
    if (process.env["SMOOTH_DEBUG"]) {
      const gaps = handedAt
        .slice(1)
        .map((t, i) => [t - (handedAt[i] ?? 0), handedAt[i] ?? 0] as const)
        .sort((a, b) => b[0] - a[0])
        .slice(0, 8);
      console.log("gaps", gaps.map(([g, at]) => `${g.toFixed(0)}@${at.toFixed(0)}`).join(" "));
    }
    if (process.env["SMOOTH_DEBUG"]) console.log(`utilisation ${(utilisation * 100).toFixed(1)} % (${delivered} / ${capacity.toFixed(1)})`);
    assert.ok(
      delivered >= required,
      `delivered ${delivered} of ${capacity.toFixed(1)} units while backlogged: ${(utilisation * 100).toFixed(1)} %, below 95 % in whole units per span (${required})`,
    );
  }
}
