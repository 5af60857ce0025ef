import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ManualClock,
  PrefetchingThrottler,
  QuotaBucketDriver,
  SluiceError,
  isSluiceError,
  quotaBucketConfig,
  type PrefetchConfig,
  type QuotaRemote,
} from "../src/index.ts";

/** A remote backed by a real QuotaBucket in virtual time, with a fixed round-trip latency. */
function bucketRemote(clock: ManualClock, limit: number | null, latencyMs = 5) {
  const driver = new QuotaBucketDriver("api", quotaBucketConfig({ limit, periodMs: 1000 }), clock);
  const calls: number[] = [];
  const released: number[] = [];
  const remote: QuotaRemote = {
    async acquire(amount, signal) {
      calls.push(amount);
      await clock.sleep(latencyMs, signal);
      await driver.acquire({ amount, signal });
    },
    release(amount) {
      released.push(amount);
      driver.release(amount);
    },
  };
  return { remote, calls, released, driver };
}

const config = (overrides: Partial<PrefetchConfig> = {}): PrefetchConfig => ({
  targetRps: 1, // request_period 1 s
  minPrefetchAmount: 1,
  maxPrefetchAmount: 1000, // limit 1000/s × 1 s
  windowMs: 10_000,
  ...overrides,
});

describe("PrefetchingThrottler", () => {
  it("serves 1,000 throttle(1) calls with a small, bounded number of refills", async () => {
    const clock = new ManualClock();
    const { remote, calls } = bucketRemote(clock, 1000);
    const throttler = new PrefetchingThrottler(config(), remote, clock, "api");
    let done = 0;
    const loop = (async () => {
      for (let i = 0; i < 1000; i++) {
        await throttler.throttle(1);
        done += 1;
      }
    })();
    assert.ok(await clock.advanceUntil(() => done === 1000, 5, 60_000), `only ${done} of 1000 done`);
    await loop;
    assert.ok(calls.length <= 20, `${calls.length} refills for 1,000 calls`);
    assert.ok(calls.length >= 2);
    // the prefetch grew: later refills are much larger than the first
    assert.ok((calls.at(-1) ?? 0) > 20, `last refill ${calls.at(-1)}`);
  });

  it("settles refills at 1/request_period in steady state, never above max prefetch", async () => {
    const clock = new ManualClock();
    const { remote, calls } = bucketRemote(clock, 100);
    const sentAt: number[] = [];
    const timed: QuotaRemote = {
      acquire: (amount, signal) => {
        sentAt.push(clock.now());
        return remote.acquire(amount, signal);
      },
    };
    // limit 100/s, request_period 500 ms: max prefetch ceil(100 × 0.5) = 50
    const throttler = new PrefetchingThrottler(config({ targetRps: 2, maxPrefetchAmount: 50, windowMs: 5000 }), timed, clock, "api");
    let stop = false;
    const loop = (async () => {
      while (!stop) await throttler.throttle(1);
    })();
    await clock.advance(40_000);
    stop = true;
    await clock.advance(2000);
    await loop;
    // Virtual time is exact: in steady state (after 20 s) a refill of 50 goes out every 500 ms.
    const steady = sentAt.filter((t) => t >= 20_000 && t < 40_000);
    assert.ok(steady.length >= 39 && steady.length <= 41, `${steady.length} refills in 20 s, target 40 (2/s)`);
    const gaps = steady.slice(1).map((t, i) => t - (steady[i] ?? t));
    assert.ok(gaps.every((gap) => Math.abs(gap - 500) <= 5), `gaps between refills: ${gaps.join(", ")} ms, target 500`);
    assert.ok(Math.max(...calls) <= 50, `largest refill ${Math.max(...calls)}`);
  });

  it("answers from the pool without a remote call when the amount fits", async () => {
    const clock = new ManualClock();
    const { remote, calls } = bucketRemote(clock, null);
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 100 }), remote, clock, "api");
    const first = throttler.throttle(1);
    await clock.advance(10);
    await first;
    // the first caller had to wait, so one more refill was queued ahead of demand
    assert.equal(calls.length, 2);
    const pooled = calls.reduce((sum, amount) => sum + amount, 0) - 1;
    for (let i = 0; i < pooled; i++) await throttler.throttle(1);
    assert.equal(calls.length, 2, `${pooled} calls answered from the pool`);
    assert.ok(throttler.tryAcquire(0));
    assert.equal(throttler.tryAcquire(1), false, "the pool is empty");
    assert.equal(calls.length, 3, "tryAcquire stocked up for later");
    await clock.advance(10);
    assert.ok(throttler.tryAcquire(1));
  });

  it("keeps one refill queued while callers outrun the pool, and none when they do not", async () => {
    const clock = new ManualClock();
    const outstanding: (() => void)[] = [];
    const remote: QuotaRemote = { acquire: () => new Promise<void>((resolve) => outstanding.push(resolve)) };
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 10, maxPrefetchAmount: 10 }), remote, clock, "api");
    const waiting = throttler.throttle(10);
    assert.equal(outstanding.length, 1);
    outstanding.shift()?.();
    await waiting;
    assert.equal(throttler.stats().inFlight, 10, "a caller waited: the next refill is already queued at the remote");
    outstanding.shift()?.();
    await clock.advance(0);
    assert.equal(throttler.stats().inFlight, 0, "nobody waited for that one: no further refill");
    assert.equal(throttler.stats().available, 10);
  });

  it("removes an aborted caller and keeps its share of the refill in the pool", async () => {
    const clock = new ManualClock();
    const { remote, calls } = bucketRemote(clock, null, 100);
    const throttler = new PrefetchingThrottler(config(), remote, clock, "api");
    const controller = new AbortController();
    const aborted = throttler.throttle(10, { signal: controller.signal });
    controller.abort(new Error("batch dropped"));
    await assert.rejects(aborted, (e: unknown) => isSluiceError(e, "CANCELLED") && /batch dropped/.test(e.message));
    assert.equal(throttler.stats().queuedRequests, 0);
    await clock.advance(200);
    assert.equal(throttler.stats().available, 10, "the refill it caused landed in the pool");
    await throttler.throttle(10); // served from the pool
    assert.equal(calls.length, 1);
  });

  it("a retriable refill failure fails nobody: the refill is asked again", async () => {
    const clock = new ManualClock();
    let failures = 1;
    const remote: QuotaRemote = {
      async acquire() {
        if (failures-- > 0) throw new SluiceError("CONTROLLER_UNAVAILABLE", "connection refused");
      },
    };
    const throttler = new PrefetchingThrottler(config({ retryDelayMs: 100 }), remote, clock, "api");
    let resolved = false;
    const waiting = throttler.throttle(3).then(() => (resolved = true));
    await clock.advance(50);
    assert.equal(resolved, false);
    await clock.advance(100);
    await waiting;
    assert.equal(throttler.stats().refillFailures, 1);
  });

  it("a final refill failure fails only the callers no remaining refill covers", async () => {
    const clock = new ManualClock();
    const outcomes: ((error?: SluiceError) => void)[] = [];
    const remote: QuotaRemote = {
      acquire: () => new Promise<void>((resolve, reject) => outcomes.push((error) => (error ? reject(error) : resolve()))),
    };
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 5 }), remote, clock, "api");
    const a = throttler.throttle(5); // refill #1: 5
    const b = throttler.throttle(5); // refill #2: 5
    const results: string[] = [];
    void a.then(() => results.push("a ok"), () => results.push("a failed"));
    void b.then(() => results.push("b ok"), (e: unknown) => results.push(isSluiceError(e, "RETRIES_EXHAUSTED") ? "b failed" : "b ?"));
    outcomes[1]?.(new SluiceError("RETRIES_EXHAUSTED", "controller unreachable for 10m"));
    await clock.advance(0);
    assert.deepEqual(results, ["b failed"]);
    outcomes[0]?.();
    await clock.advance(0);
    assert.deepEqual(results, ["b failed", "a ok"]);
  });

  it("close fails waiters with CANCELLED and gives the pool back", async () => {
    const clock = new ManualClock();
    const { remote, released, calls } = bucketRemote(clock, null, 1);
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 50 }), remote, clock, "api");
    const first = throttler.throttle(1);
    await clock.advance(5);
    await first;
    const blocked = throttler.throttle(1000);
    throttler.close();
    await assert.rejects(blocked, (e: unknown) => isSluiceError(e, "CANCELLED"));
    await clock.advance(5);
    // 49 left of the first refill of 50, plus the one queued ahead because the first caller waited
    assert.equal(calls[0], 50);
    assert.ok(released.includes(49 + (calls[1] ?? 0)), `released ${released.join(", ")} of refills ${calls.join(", ")}`);
    await assert.rejects(throttler.throttle(1), (e: unknown) => isSluiceError(e, "CANCELLED"));
  });

  it("retire serves those already waiting, then returns the rest and closes", async () => {
    const clock = new ManualClock();
    const { remote, released } = bucketRemote(clock, null, 10);
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 8 }), remote, clock, "api");
    const waiting = throttler.throttle(3);
    throttler.retire();
    await clock.advance(20);
    await waiting;
    assert.deepEqual(released, [5]);
  });

  it("rejects invalid amounts with INVALID_AMOUNT", async () => {
    const clock = new ManualClock();
    const throttler = new PrefetchingThrottler(config(), bucketRemote(clock, null).remote, clock, "api");
    for (const amount of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      await assert.rejects(throttler.throttle(amount), (e: unknown) => isSluiceError(e, "INVALID_AMOUNT"));
    }
    assert.throws(() => throttler.release(-5), (e: unknown) => isSluiceError(e, "INVALID_AMOUNT"));
  });
});

describe("PrefetchingThrottler with fractional amounts", () => {
  it("serves 100 calls of throttle(0.1) from refills of 1 without getting stuck on rounding", async () => {
    const clock = new ManualClock();
    const remote: QuotaRemote = { acquire: async () => {} };
    const throttler = new PrefetchingThrottler(config({ minPrefetchAmount: 1, maxPrefetchAmount: 1 }), remote, clock, "api");
    let done = 0;
    const loop = (async () => {
      for (let i = 0; i < 100; i++) {
        await throttler.throttle(0.1);
        done += 1;
      }
    })();
    assert.ok(await clock.advanceUntil(() => done === 100, 1, 1000), `stuck after ${done} calls: ${JSON.stringify(throttler.stats())}`);
    await loop;
  });
});

describe("PrefetchingThrottler properties", () => {
  it("never leaves a caller waiting with nothing in flight, whatever fractional amounts add up to", async () => {
    const fc = (await import("fast-check")).default;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({ kind: fc.constant("throttle" as const), amount: fc.double({ min: 0.001, max: 60, noNaN: true }) }),
            fc.record({ kind: fc.constant("release" as const), amount: fc.double({ min: 0.001, max: 30, noNaN: true }) }),
            fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 50 }) }),
          ),
          { maxLength: 60 },
        ),
        async (ops) => {
          const clock = new ManualClock();
          // refills come back out of order (latency 5, 1, 3, 5, …), as they can from a real controller
          let calls = 0;
          const remote: QuotaRemote = { acquire: (_amount, signal) => clock.sleep([5, 1, 3][calls++ % 3] ?? 1, signal) };
          const throttler = new PrefetchingThrottler(config({ maxPrefetchAmount: 37.3 }), remote, clock, "api");
          const pending: Promise<void>[] = [];
          for (const op of ops) {
            if (op.kind === "throttle") pending.push(throttler.throttle(op.amount));
            else if (op.kind === "release") throttler.release(op.amount);
            else await clock.advance(op.ms);
          }
          let settled = 0;
          for (const p of pending) void p.then(() => (settled += 1));
          await clock.advanceUntil(() => settled === pending.length, 10, 60_000);
          assert.equal(settled, pending.length, `stuck: ${JSON.stringify(throttler.stats())}`);
        },
      ),
      { numRuns: 200 },
    );
  });
});

/** A remote whose refills land only when the test says so, oldest first; what comes back is recorded. */
function steppedRemote() {
  const refills: { readonly amount: number; readonly land: () => void }[] = [];
  const released: number[] = [];
  const remote: QuotaRemote = {
    // Ignores the signal on purpose: a grant already on its way still arrives after close().
    acquire: (amount) => new Promise<void>((resolve) => refills.push({ amount, land: resolve })),
    release: (amount) => {
      released.push(amount);
    },
  };
  const land = async (clock: ManualClock) => {
    const next = refills.shift();
    assert.ok(next, "no refill in flight");
    next.land();
    await clock.advance(0);
  };
  return { remote, refills, released, land };
}

/** Deterministic stand-in for Math.random (a 32-bit LCG), so a failure replays. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

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
    assert.deepEqual(refills.map((r) => r.amount), [10, 10]);
    await step(); // two callers served, 2 left, the third waits
    await step(); // the third served, 8 left; callers outran the pool, so a refill is queued ahead
    await calls;
    assert.deepEqual(refills.map((r) => r.amount), [10], "the refill kept queued is unchanged");
    await step(); // the burst is over: 8 + 10 = 18 would sit in the pool
    assert.deepEqual(released, [8]);
    assert.equal(throttler.stats().available, 10);

    // Burst 2 on a full pool: two from the pool, the third waits for one refill.
    calls = burst();
    assert.deepEqual(refills.map((r) => r.amount), [10]);
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
    assert.deepEqual(refills.map((r) => r.amount), [10, 14], "the deficit: 30 - 6 - 10");
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
    assert.deepEqual(refills.map((r) => r.amount), [25]);
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
    assert.equal(returned, released.reduce((a, b) => a + b, 0));
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
          const throttler = new PrefetchingThrottler(
            config({ targetRps, maxPrefetchAmount: bound, windowMs: (10 * 1000) / targetRps }),
            remote,
            clock,
            "api",
          );
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
