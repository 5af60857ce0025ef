import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ManualClock,
  PrefetchingThrottler,
  QuotaBucketDriver,
  RESOLVED,
  SluiceError,
  quotaBucketConfig,
  type PrefetchConfig,
  type QuotaRemote,
} from "../src/index.ts";

// An unlimited throttler's client (PrefetchConfig.unbounded): its quota never binds, so it refills
// while half of its pool is left, a young client sizes refills by its rate so far, and a caller the
// pool cannot cover takes what the refills in flight will bring instead of waiting for them. These
// run in virtual time against a real unlimited QuotaBucket with a fixed round trip.

const ROUND_TRIP_MS = 30;

function unlimitedRemote(clock: ManualClock, roundTripMs = ROUND_TRIP_MS) {
  const driver = new QuotaBucketDriver("rows", quotaBucketConfig({ limit: null, periodMs: 1000 }), clock);
  const calls: { readonly at: number; readonly amount: number }[] = [];
  const remote: QuotaRemote = {
    async acquire(amount, signal) {
      calls.push({ at: clock.now(), amount });
      await clock.sleep(roundTripMs, signal);
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
  it("never waits, from the first call on, with a 30 ms round trip", async () => {
    const clock = new ManualClock();
    const { remote, calls } = unlimitedRemote(clock);
    const throttler = new PrefetchingThrottler(config(true), remote, clock, "rows");
    // 100 rows per millisecond (100,000 rows/s) for 3 s of virtual time
    const waits = await steadyDemand(clock, throttler, 100, 3000);
    throttler.close();
    assert.equal(waits, 0, `${waits} waits, ${calls.length} refills`);
    assert.ok(calls.length <= 12, `refills stay few: ${calls.length}`);
  });

  it("a job with a 3 ms round trip never waits over a run, and its refills stay few", async () => {
    const clock = new ManualClock();
    const { remote, calls } = unlimitedRemote(clock, 3);
    const throttler = new PrefetchingThrottler(config(true), remote, clock, "rows");
    // 20 iterations of 100 rows per millisecond (2,000,000 rows/s) for 10 s of virtual time
    const waits = await steadyDemand(clock, throttler, 2000, 10_000);
    const { available, inFlight } = throttler.stats();
    throttler.close();
    assert.equal(waits, 0);
    assert.ok(calls.length <= 12, `refills: ${calls.map((c) => `${c.amount}@${c.at}`).join(", ")}`);
    assert.ok(available + inFlight >= 0, "what was lent is covered by what is in flight");
  });

  it("lends the first call what its refill will bring, and the landing refill pays it back first", async () => {
    const clock = new ManualClock();
    const { remote, calls } = unlimitedRemote(clock);
    const throttler = new PrefetchingThrottler(config(true), remote, clock, "rows");
    assert.equal(throttler.throttle(100), RESOLVED, "no wait for the first RequestQuota");
    assert.deepEqual(calls, [{ at: 0, amount: 100 }], "a refill of max(prefetch, deficit)");
    assert.equal(throttler.stats().available, -100);
    assert.equal(throttler.throttle(50), RESOLVED, "the next call is lent too");
    assert.equal(calls.length, 2, "with a refill of its own: the one in flight covers only the first");
    await clock.advance(ROUND_TRIP_MS);
    const { available, inFlight } = throttler.stats();
    assert.equal(inFlight, 0);
    assert.ok(available >= 0, `the refills paid for both calls: pool ${available}`);
    throttler.close();
  });

  it("lends nothing while a refill is failing: callers wait for the controller (no silent fallback)", async () => {
    const clock = new ManualClock();
    const outcomes: ((error?: Error) => void)[] = [];
    const calls: number[] = [];
    const remote: QuotaRemote = {
      acquire: (amount) => {
        calls.push(amount);
        return new Promise<void>((resolve, reject) => outcomes.push((error) => (error ? reject(error) : resolve())));
      },
    };
    const throttler = new PrefetchingThrottler({ ...config(true), retryDelayMs: 100 }, remote, clock, "rows");
    assert.equal(throttler.throttle(10), RESOLVED);
    outcomes.shift()?.(new SluiceError("CONTROLLER_UNAVAILABLE", "connection refused"));
    await clock.advance(0);
    let settled = false;
    const waiting = throttler.throttle(5);
    assert.notEqual(waiting, RESOLVED, "a refill failed and none landed since: this caller waits");
    void waiting.then(() => (settled = true));
    await clock.advance(100);
    assert.equal(calls.length, 2, "one retry");
    assert.ok((calls[1] ?? 0) >= 15, `the retry (${calls[1]}) covers what was lent (10) and what waits (5)`);
    outcomes.shift()?.();
    await clock.advance(0);
    assert.ok(settled, "served once the controller answered");
    assert.equal(throttler.stats().available, (calls[1] ?? 0) - 15, "the refill paid what was lent; the rest is in the pool");
    assert.equal(throttler.throttle(20), RESOLVED, "lending again once a refill landed");
    throttler.close();
  });

  it("writes off what was lent when the retry budget is spent, and asks no more for it", async () => {
    const clock = new ManualClock();
    const outcomes: ((error?: Error) => void)[] = [];
    const remote: QuotaRemote = {
      acquire: () => new Promise<void>((resolve, reject) => outcomes.push((error) => (error ? reject(error) : resolve()))),
    };
    const throttler = new PrefetchingThrottler({ ...config(true), retryDelayMs: 100 }, remote, clock, "rows");
    assert.equal(throttler.throttle(10), RESOLVED);
    outcomes.shift()?.(new SluiceError("RETRIES_EXHAUSTED", "controller unreachable for 10m"));
    await clock.advance(1000);
    assert.equal(outcomes.length, 0, "no refill for quota nobody waits for");
    assert.equal(throttler.stats().available, 0);
    throttler.close();
  });

  it("closed with quota lent: the landing refill pays it, and only the rest goes back", async () => {
    const clock = new ManualClock();
    const landings: (() => void)[] = [];
    const released: number[] = [];
    const remote: QuotaRemote = {
      acquire: () => new Promise<void>((resolve) => landings.push(resolve)),
      release: (amount) => void released.push(amount),
    };
    const throttler = new PrefetchingThrottler({ ...config(true), minPrefetchAmount: 100 }, remote, clock, "rows");
    assert.equal(throttler.throttle(30), RESOLVED);
    throttler.close();
    assert.deepEqual(released, [], "nothing in the pool to give back yet");
    landings.shift()?.();
    await clock.advance(0);
    assert.deepEqual(released, [70], "the refill of 100 paid the 30 lent");
  });

  it("a throttler with a limit never lends", async () => {
    const clock = new ManualClock();
    const landings: (() => void)[] = [];
    const remote: QuotaRemote = { acquire: () => new Promise<void>((resolve) => landings.push(resolve)) };
    const throttler = new PrefetchingThrottler({ ...config(false), maxPrefetchAmount: 1000 }, remote, clock, "rows");
    const first = throttler.throttle(10);
    assert.notEqual(first, RESOLVED);
    landings.shift()?.();
    await first;
    assert.ok(throttler.stats().available >= 0);
    throttler.close();
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
