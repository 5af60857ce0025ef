import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, PrefetchingThrottler, QuotaBucketDriver, RESOLVED, quotaBucketConfig, type PrefetchConfig, type QuotaRemote } from "../src/index.ts";

// An unlimited throttler's client (PrefetchConfig.unbounded): its quota never binds, so it refills
// while half of its pool is left and a young client sizes refills by its rate so far. These run in
// virtual time against a real unlimited QuotaBucket with a fixed round trip.

const ROUND_TRIP_MS = 30;

function unlimitedRemote(clock: ManualClock) {
  const driver = new QuotaBucketDriver("rows", quotaBucketConfig({ limit: null, periodMs: 1000 }), clock);
  const calls: { readonly at: number; readonly amount: number }[] = [];
  const remote: QuotaRemote = {
    async acquire(amount, signal) {
      calls.push({ at: clock.now(), amount });
      await clock.sleep(ROUND_TRIP_MS, signal);
      await driver.acquire({ amount, signal });
    },
  };
  return { remote, calls };
}

const config = (unbounded: boolean): PrefetchConfig => ({
  targetRps: 0.2, // request_period 5 s, the default
  minPrefetchAmount: 1,
  maxPrefetchAmount: 1e9,
  windowMs: 50_000,
  unbounded,
});

/** A job taking `perMs` units every virtual millisecond for `ms`; returns how many takes had to wait. */
async function steadyDemand(clock: ManualClock, throttler: PrefetchingThrottler, perMs: number, ms: number): Promise<number> {
  let waited = 0;
  for (let t = 0; t < ms; t++) {
    const pending = throttler.throttle(perMs);
    if (pending !== RESOLVED) {
      waited += 1;
      // Let virtual time run until the refill lands, like a real job awaiting it.
      let done = false;
      void pending.then(() => (done = true));
      while (!done) await clock.advance(1);
    } else {
      await clock.advance(1);
    }
  }
  return waited;
}

describe("PrefetchingThrottler for an unlimited throttler", () => {
  it("waits for a few round trips at the start, then never again", async () => {
    // (This once compared with a bounded client, which waited at every doubling; a bounded client now
    // grows by a step while its callers wait — CONTENDED_STEP_FRACTION — so it waits little too.)
    const clock = new ManualClock();
    const { remote, calls } = unlimitedRemote(clock);
    const throttler = new PrefetchingThrottler(config(true), remote, clock, "rows");
    // 100 rows per millisecond (100,000 rows/s) for 3 s of virtual time
    const waits = await steadyDemand(clock, throttler, 100, 3000);
    throttler.close();
    assert.ok(waits <= 4, `${waits} waits, ${calls.length} refills`);
    assert.ok(calls.length <= 12, `refills stay few: ${calls.length}`);
  });

  it("sends the next refill while half the pool is left, sized within maxPrefetchAmount", async () => {
    const clock = new ManualClock();
    const calls: number[] = [];
    const landings: (() => void)[] = [];
    const remote: QuotaRemote = {
      acquire: (amount) => {
        calls.push(amount);
        return new Promise<void>((resolve) => landings.push(resolve));
      },
    };
    const throttler = new PrefetchingThrottler({ ...config(true), minPrefetchAmount: 100, maxPrefetchAmount: 150 }, remote, clock, "rows");
    throttler.release(100); // a pool of 100, nothing in flight, prefetch 100
    assert.equal(throttler.throttle(40), RESOLVED);
    assert.deepEqual(calls, [], "60 left of a prefetch of 100: no refill yet");
    assert.equal(throttler.throttle(20), RESOLVED);
    assert.deepEqual(calls, [100], "40 left: the next refill goes out before anyone waits");
    assert.equal(throttler.throttle(30), RESOLVED);
    assert.deepEqual(calls, [100], "one refill ahead at a time");
    landings.shift()?.();
    await clock.advance(0);
    assert.equal(throttler.stats().available, 110);
    throttler.release(100);
    assert.equal(throttler.throttle(200), RESOLVED);
    // The young client's rate (100 granted within 20 ms) sizes the prefetch far above 150: the
    // refill is cut to what keeps pool + refill within maxPrefetchAmount.
    assert.deepEqual(calls, [100, 140], "10 left: the refill is maxPrefetchAmount − pool = 150 − 10");
    throttler.close();
  });
});
