import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ManualClock,
  PacedThrottler,
  QuotaBucketDriver,
  maxPacedAnswer,
  paceReachMs,
  quotaBucketConfig,
  type PacedQuotaRemote,
  type PaceSchedule,
} from "../src/index.ts";

// A smooth answer never reaches further than one answer of the limit in force (docs/design.md §11.1): a
// controller that starts after this one begins its slots one reach ahead, and counts on it. A
// request asked for under a larger limit, answered after the limit fell, is answered in part.

describe("smooth answers after the limit falls", () => {
  it("a request sized for limit 10 is answered with one answer of limit 2, and its retry with the same part", async () => {
    const clock = new ManualClock(0);
    const config = (limit: number) => quotaBucketConfig({ limit, periodMs: 1000, smooth: true, requestPeriodMs: 500 });
    const driver = new QuotaBucketDriver("pdf", config(10), clock);
    await clock.advance(paceReachMs({ limit: 10, requestPeriodMs: 500 }));
    // Another client keeps the cursor busy, so the 5-unit request waits in the queue…
    const first = driver.acquire({ amount: 5, requestId: "a-1" });
    const stale = driver.acquire({ amount: 5, requestId: "b-1" });
    await first;
    // …while the limit falls to 2 (one answer: ceil(2 × 0.5 s) = 1 unit).
    driver.reconfigure(config(2));
    assert.equal(maxPacedAnswer({ limit: 2, requestPeriodMs: 500 }), 1);
    let answer: Awaited<typeof stale> | null = null;
    void stale.then((grant) => (answer = grant));
    await clock.advanceUntil(() => answer !== null, 10, 5_000);
    const grant = answer as unknown as Awaited<typeof stale>;
    assert.equal(grant.granted, 1, "one answer of the new limit, not 5 slots spanning 2.6 s");
    // The answer's last slot lies within one reach of the limit in force.
    const lastSlotIn = (grant.paceStartDelayMs ?? 0) + (grant.granted - 1) * (grant.paceIntervalMs ?? 0);
    assert.ok(lastSlotIn <= paceReachMs({ limit: 2, requestPeriodMs: 500 }), `last slot ${lastSlotIn.toFixed(1)} ms ahead`);
    // A retry under the same id (a lost answer) gets the same part, not a "reused id" refusal.
    const retry = await driver.acquire({ amount: 5, requestId: "b-1" });
    assert.equal(retry.granted, 1);
    assert.equal(retry.paceAnsweredAtMs !== undefined, true);
  });

  it("a client answered in part keeps asking until its callers are served", async () => {
    const clock = new ManualClock(0);
    const calls: number[] = [];
    let cursorAt = 0;
    const remote: PacedQuotaRemote = {
      async acquirePaced(amount, signal): Promise<PaceSchedule> {
        calls.push(amount);
        await clock.sleep(2, signal);
        const granted = Math.min(amount, 2);
        const startAt = Math.max(clock.now(), cursorAt);
        cursorAt = startAt + granted * 100;
        return { startDelayMs: startAt - clock.now(), intervalMs: 100, granted };
      },
    };
    const throttler = new PacedThrottler(
      { targetRps: 1, minPrefetchAmount: 1, maxPrefetchAmount: 10, windowMs: 10_000, slotExpiryMs: 20 },
      remote,
      clock,
      "pdf",
    );
    const times: number[] = [];
    const all = Promise.all(Array.from({ length: 6 }, () => throttler.throttle(1).then(() => times.push(clock.now()))));
    await clock.advanceUntil(() => times.length === 6, 5, 10_000);
    await all;
    assert.ok(calls.length >= 3, `answered 2 at a time, so asked at least 3 times: ${calls.join(", ")}`);
    for (let i = 1; i < times.length; i++) assert.ok((times[i] ?? 0) - (times[i - 1] ?? 0) >= 100 - 1e-6, `one slot apart: ${times.join(", ")}`);
  });
});
