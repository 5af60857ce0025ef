// PrefetchingThrottler's pool bound (maxPrefetchAmount ≈ limit × request_period): what a client
// keeps above the bound goes back to the controller, and nothing is lost on the way.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, PrefetchingThrottler, QuotaBucketDriver, isSluiceError, quotaBucketConfig, type QuotaRemote } from "../src/index.ts";
import { bucketRemote, config, seeded, steppedRemote } from "./prefetching-throttler-harness.ts";

describe("PrefetchingThrottler pool bound (maxPrefetchAmount ≈ limit × request_period)", () => {
  it("gives back exactly what the refill kept queued brings above the bound when the burst ends as it lands", async () => {
    const clock = new ManualClock();
    const { remote, refills, released, land } = steppedRemote();
    // limit 10/s × request_period 1 s; the prefetch is pinned at 10 so every refill is known
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 10, maxPrefetchAmount: 10 }), remote, clock, "api");
    const pools: number[] = [];
    const step = async () => {
      await land(clock);
      pools.push(throttler.stats().available);
    };
    const burst = () => Promise.all([throttler.throttle(4), throttler.throttle(4), throttler.throttle(4)]);

    // Burst 1 on an empty pool: 12 asked, two refills of 10.
    let calls = burst();
    assert.deepEqual(
      refills.map((r) => r.amount),
      [10, 10],
    );
    await step(); // two callers served, 2 left, the third waits
    await step(); // the third served, 8 left; callers outran the pool, so a refill is queued ahead
    await calls;
    assert.deepEqual(
      refills.map((r) => r.amount),
      [10],
      "the refill kept queued is unchanged",
    );
    await step(); // the burst is over: 8 + 10 = 18 would sit in the pool
    assert.deepEqual(released, [8]);
    assert.equal(throttler.stats().available, 10);

    // Burst 2 on a full pool: two from the pool, the third waits for one refill.
    calls = burst();
    assert.deepEqual(
      refills.map((r) => r.amount),
      [10],
    );
    await step(); // 2 + 10: the third served, 8 left, a refill queued ahead
    await calls;
    await step(); // 8 + 10 again
    assert.deepEqual(released, [8, 8]);
    assert.deepEqual(pools, [2, 8, 10, 8, 10]);
    assert.ok(pools.every((pool) => pool <= 10));
    assert.equal(throttler.stats().returned, 16);
    // One refill more than without the bound, which would have served burst 2 from a pool of 18:
    // holding less is the point.
    assert.equal(throttler.stats().refills, 5);
  });

  it("serves waiting callers first: quota they still wait for is not excess, even above the bound", async () => {
    const clock = new ManualClock();
    const { remote, refills, released, land } = steppedRemote();
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 10, maxPrefetchAmount: 10 }), remote, clock, "api");
    await Promise.all([throttler.throttle(4), land(clock)]); // 6 left, a refill of 10 queued ahead
    let big = false;
    void throttler.throttle(30).then(() => (big = true));
    assert.deepEqual(
      refills.map((r) => r.amount),
      [10, 14],
      "the deficit: 30 - 6 - 10",
    );
    await land(clock);
    assert.equal(throttler.stats().available, 16, "held for the caller waiting for 30");
    assert.deepEqual(released, []);
    await land(clock);
    assert.ok(big);
    assert.equal(throttler.stats().available, 0);
    assert.deepEqual(released, []);
  });

  it("keeps what a failed tryAcquire stocked up for, so a try above the bound can succeed", async () => {
    const clock = new ManualClock();
    const { remote, refills, released, land } = steppedRemote();
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 10, maxPrefetchAmount: 10 }), remote, clock, "api");
    assert.equal(throttler.tryAcquire(25), false);
    assert.deepEqual(
      refills.map((r) => r.amount),
      [25],
    );
    await land(clock);
    assert.equal(throttler.tryAcquire(25), true);
    assert.deepEqual(released, []);
    // Once taken, the bound is back: a refill landing on a pool nobody asked for is trimmed.
    throttler.release(6);
    assert.equal(throttler.tryAcquire(7), false);
    await land(clock); // 6 + 10
    assert.deepEqual(released, [6]);
    assert.equal(throttler.stats().available, 10);
  });

  it("a small try in between does not undo the stock-up of a large one; an abandoned one expires after a request_period", async () => {
    const clock = new ManualClock();
    const { remote, released, land } = steppedRemote();
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 10, maxPrefetchAmount: 10 }), remote, clock, "api");
    throttler.release(10);
    assert.equal(throttler.tryAcquire(40), false); // stocks up: a refill of 30
    assert.equal(throttler.tryAcquire(1), true);
    assert.equal(throttler.tryAcquire(2), true);
    await land(clock); // 7 + 30
    assert.deepEqual(released, [], "held for the try of 40");
    assert.equal(throttler.tryAcquire(40), false, "37 is not 40 yet");
    await land(clock);
    assert.equal(throttler.tryAcquire(40), true, "it comes back and succeeds");
    // Nobody comes back for this one: after a request_period its room is gone.
    assert.equal(throttler.tryAcquire(45), false);
    await clock.advance(2_000); // two request periods of 1 s
    await land(clock);
    assert.equal(throttler.stats().available, 10, "trimmed back to the bound");
    assert.ok(released.length > 0);
  });

  it("returns a refill that lands after close() whole, and counts it", async () => {
    const clock = new ManualClock();
    const { remote, released, land } = steppedRemote();
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 10, maxPrefetchAmount: 10 }), remote, clock, "api");
    const waiting = throttler.throttle(4);
    throttler.close();
    await assert.rejects(waiting, (e: unknown) => isSluiceError(e, "CANCELLED"));
    await land(clock);
    assert.deepEqual(released, [10]);
    assert.equal(throttler.stats().available, 0);
    assert.equal(throttler.stats().returned, 10);
  });

  it("an unlimited throttler's client (max prefetch 1e9) returns nothing while it runs", async () => {
    const clock = new ManualClock();
    const { remote, released } = bucketRemote(clock, null);
    const throttler = new PrefetchingThrottler(config({ targetRps: 2, maxPrefetchAmount: 1e9 }), remote, clock, "api");
    const random = seeded(7);
    let stop = false;
    const loop = (async () => {
      while (!stop) {
        await clock.sleep(Math.floor(random() * 2000));
        for (let i = 0, n = 20 + Math.floor(random() * 180); i < n; i++) await throttler.throttle(5);
      }
    })();
    await clock.advance(30_000);
    stop = true;
    await clock.advance(5000);
    await loop;
    assert.deepEqual(released, []);
  });

  it("a bursty client never holds more than the bound, after every step and every landing; nothing is lost", async () => {
    const clock = new ManualClock();
    // limit 1000/s, request_period 500 ms: bound 500 (the bench's bursty scenario, one client)
    const bound = 500;
    const driver = new QuotaBucketDriver("api", quotaBucketConfig({ limit: 1000, periodMs: 1000 }), clock);
    let granted = 0;
    let largestBeforeReturn = 0;
    const released: number[] = [];
    const violations: string[] = [];
    const pools: number[] = [];
    const check = (when: string) => {
      const { available } = throttler.stats();
      pools.push(available);
      if (available > bound) violations.push(`${when} at ${clock.now()} ms: pool ${available}`);
    };
    const remote: QuotaRemote = {
      acquire(amount, signal) {
        const landed = clock
          .sleep(5, signal)
          .then(() => driver.acquire({ amount, signal }))
          .then(() => {
            granted += amount;
          });
        // Registered before the client's own handler, so the read runs after it added the refill,
        // served its waiters and returned any excess.
        landed.then(
          () => queueMicrotask(() => check("after a landing")),
          () => {},
        );
        return landed;
      },
      release(amount) {
        released.push(amount);
        // The pool is already down to the bound: amount is what the landing brought above it.
        if (!throttler.isClosed && throttler.stats().available !== bound) violations.push(`release ${amount} left pool ${throttler.stats().available}`);
        largestBeforeReturn = Math.max(largestBeforeReturn, bound + amount);
        driver.release(amount);
      },
    };
    const throttler = new PrefetchingThrottler(config({ targetRps: 2, maxPrefetchAmount: bound, windowMs: 5000 }), remote, clock, "api");
    const random = seeded(17);
    let consumed = 0;
    let stop = false;
    let stopped = false;
    void (async () => {
      while (!stop) {
        // Idle up to 2 s, then 20–200 calls as fast as the quota allows.
        await clock.sleep(Math.floor(random() * 2000));
        for (let i = 0, n = 20 + Math.floor(random() * 180); i < n && !stop; i++) {
          await throttler.throttle(5);
          consumed += 5;
        }
      }
      stopped = true;
    })();
    for (let t = 0; t < 60_000; t += 10) {
      await clock.advance(10);
      check("after a step");
    }
    stop = true;
    assert.ok(await clock.advanceUntil(() => stopped && throttler.stats().inFlight === 0, 10, 10_000));
    assert.deepEqual(violations, []);
    assert.ok(pools.length > 6000);
    assert.ok(released.length > 0 && largestBeforeReturn > 1.5 * bound, `the scenario never overfilled the pool (${largestBeforeReturn})`);
    const { available, returned } = throttler.stats();
    assert.equal(
      returned,
      released.reduce((a, b) => a + b, 0),
    );
    assert.equal(granted, consumed + available + returned);
    throttler.close();
    assert.equal(granted, consumed + throttler.stats().returned, "close returned the rest");
  });

  it("a backlogged client makes no more refill RPCs per request_period than before, and no release until it stops", async () => {
    const clock = new ManualClock();
    const { remote, calls, released } = bucketRemote(clock, 100);
    // limit 100/s, request_period 500 ms: bound 50
    const throttler = new PrefetchingThrottler(config({ targetRps: 2, maxPrefetchAmount: 50, windowMs: 5000 }), remote, clock, "api");
    let stop = false;
    const loop = (async () => {
      while (!stop) await throttler.throttle(5);
    })();
    await clock.advance(20_000);
    const before = calls.length;
    await clock.advance(20_000);
    const perPeriod = (calls.length - before) / 40;
    assert.deepEqual(released, [], "callers always wait: nothing is ever excess");
    stop = true;
    await clock.advance(2000);
    await loop;
    assert.ok(perPeriod <= 1.05, `${perPeriod} refills per request_period`);
    // Demand stopped as the refill kept queued landed: that one is returned.
    assert.equal(released.length, 1);
    assert.ok(throttler.stats().available <= 50);
  });
});

describe("PrefetchingThrottler pool bound properties", () => {
  it("after every landing the pool holds at most the bound (or less than callers wait for); granted = consumed + pool + returned", async () => {
    const fc = (await import("fast-check")).default;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          bound: fc.double({ min: 1, max: 60, noNaN: true }),
          targetRps: fc.integer({ min: 1, max: 10 }),
          bursts: fc.array(
            fc.record({
              idleMs: fc.integer({ min: 0, max: 1500 }),
              calls: fc.integer({ min: 1, max: 12 }),
              // a fraction of the bound; above 1 the head caller must collect more than the bound
              size: fc.double({ min: 0.01, max: 1.5, noNaN: true }),
              together: fc.boolean(),
            }),
            { minLength: 1, maxLength: 8 },
          ),
        }),
        async ({ bound, targetRps, bursts }) => {
          const clock = new ManualClock();
          const driver = new QuotaBucketDriver("api", quotaBucketConfig({ limit: bound * targetRps, periodMs: 1000 }), clock);
          let granted = 0;
          let returned = 0;
          const violations: string[] = [];
          const check = () => {
            const { available, queuedRequests, queuedAmount } = throttler.stats();
            const holds = queuedRequests === 0 ? bound : Math.max(bound, queuedAmount);
            if (available > holds * (1 + 1e-9)) violations.push(`pool ${available} > ${holds} (${queuedRequests} waiting)`);
          };
          let latency = 0;
          const remote: QuotaRemote = {
            acquire(amount, signal) {
              // refills come back out of order (latency 5, 1, 3, 5, …), as they can from a real controller
              const landed = clock
                .sleep([5, 1, 3][latency++ % 3] ?? 1, signal)
                .then(() => driver.acquire({ amount, signal }))
                .then(() => {
                  granted += amount;
                });
              landed.then(
                () => queueMicrotask(check),
                () => {},
              );
              return landed;
            },
            release(amount) {
              returned += amount;
              driver.release(amount);
            },
          };
          const throttler = new PrefetchingThrottler(config({ targetRps, maxPrefetchAmount: bound, windowMs: (10 * 1000) / targetRps }), remote, clock, "api");
          let consumed = 0;
          let done = false;
          const take = async (amount: number) => {
            await throttler.throttle(amount);
            consumed += amount;
          };
          void (async () => {
            for (const burst of bursts) {
              await clock.sleep(burst.idleMs);
              const amount = burst.size * bound;
              if (burst.together) await Promise.all(Array.from({ length: burst.calls }, () => take(amount)));
              else for (let i = 0; i < burst.calls; i++) await take(amount);
            }
            done = true;
          })();
          const settled = () => done && throttler.stats().inFlight === 0;
          assert.ok(await clock.advanceUntil(settled, 100, 3_600_000), `stuck: ${JSON.stringify(throttler.stats())}`);
          assert.deepEqual(violations, []);
          const { available } = throttler.stats();
          assert.ok(Math.abs(returned - throttler.stats().returned) <= 1e-9 * granted);
          const lost = granted - (consumed + available + returned);
          assert.ok(Math.abs(lost) <= 1e-9 * Math.max(1, granted), `granted ${granted}, consumed ${consumed}, pool ${available}, returned ${returned}`);
        },
      ),
      { numRuns: 100 },
    );
  });
});
