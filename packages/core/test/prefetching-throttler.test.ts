import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, PrefetchingThrottler, SluiceError, isSluiceError, type QuotaRemote } from "../src/index.ts";
import { bucketRemote, config } from "./prefetching-throttler-harness.ts";

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
    assert.ok(
      gaps.every((gap) => Math.abs(gap - 500) <= 5),
      `gaps between refills: ${gaps.join(", ")} ms, target 500`,
    );
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
    void a.then(
      () => results.push("a ok"),
      () => results.push("a failed"),
    );
    void b.then(
      () => results.push("b ok"),
      (e: unknown) => results.push(isSluiceError(e, "RETRIES_EXHAUSTED") ? "b failed" : "b ?"),
    );
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
    assert.throws(
      () => throttler.release(-5),
      (e: unknown) => isSluiceError(e, "INVALID_AMOUNT"),
    );
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
