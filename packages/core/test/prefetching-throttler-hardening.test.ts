import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, PrefetchingThrottler, SluiceError, isSluiceError, type PrefetchConfig, type QuotaRemote } from "../src/index.ts";

// Deviations from docs/design.md §9.1 and §9.7 a review of main found in the prefetching client (issue 9).

const config = (overrides: Partial<PrefetchConfig> = {}): PrefetchConfig => ({
  targetRps: 1,
  minPrefetchAmount: 5,
  maxPrefetchAmount: 1000,
  windowMs: 10_000,
  ...overrides,
});

/** A remote whose refills settle only when the test says so, in the order they were asked. */
function scriptedRemote() {
  const outcomes: ((error?: SluiceError) => void)[] = [];
  const released: number[] = [];
  const remote: QuotaRemote = {
    acquire: () => new Promise<void>((resolve, reject) => outcomes.push((error) => (error ? reject(error) : resolve()))),
    release: (amount) => {
      released.push(amount);
    },
  };
  return { remote, outcomes, released };
}

function track(promise: Promise<void>, name: string, results: string[]): void {
  promise.then(
    () => results.push(`${name} ok`),
    (e: unknown) => results.push(isSluiceError(e, "RETRIES_EXHAUSTED") ? `${name} failed` : `${name} ?`),
  );
}

describe("PrefetchingThrottler: a final refill failure fails callers by their own wait", () => {
  it("fails the caller that waited through the failed refill's whole budget, not a later one", async () => {
    const clock = new ManualClock();
    const { remote, outcomes } = scriptedRemote();
    const throttler = new PrefetchingThrottler(config(), remote, clock, "api");
    const results: string[] = [];
    track(throttler.throttle(5), "early", results); // refill #1, sent at 0
    await clock.advance(60_000);
    track(throttler.throttle(5), "late", results); // refill #2, sent a minute later
    assert.equal(outcomes.length, 2);
    outcomes[0]?.(new SluiceError("RETRIES_EXHAUSTED", "controller unreachable for 10m"));
    await clock.advance(0);
    assert.deepEqual(results, ["early failed"], "the caller whose wait began before the failed refill was sent");
    outcomes[1]?.();
    await clock.advance(0);
    assert.deepEqual(results, ["early failed", "late ok"]);
  });

  it("a later caller left uncovered gets a refill of its own instead of failing", async () => {
    const clock = new ManualClock();
    const { remote, outcomes } = scriptedRemote();
    const throttler = new PrefetchingThrottler(config(), remote, clock, "api");
    const results: string[] = [];
    track(throttler.throttle(3), "a", results); // refill #1 of 5 (the minimum) covers a and 2 more
    await clock.advance(10);
    track(throttler.throttle(2), "b", results); // covered by refill #1: no refill of its own
    assert.equal(outcomes.length, 1);
    outcomes[0]?.(new SluiceError("RETRIES_EXHAUSTED", "gave up"));
    await clock.advance(0);
    assert.deepEqual(results, ["a failed"], "b came after refill #1 was sent: its own wait has just begun");
    assert.equal(outcomes.length, 2, "a new refill for b");
    outcomes[1]?.();
    await clock.advance(0);
    assert.deepEqual(results, ["a failed", "b ok"]);
  });
});

describe("PrefetchingThrottler: amount 0 and a closed client", () => {
  it("throttle(0) and tryAcquire(0) succeed at once, even behind waiting callers (docs/design.md §9.1)", async () => {
    const clock = new ManualClock();
    const { remote } = scriptedRemote();
    const throttler = new PrefetchingThrottler(config(), remote, clock, "api");
    void throttler.throttle(5).catch(() => {});
    let zeroDone = false;
    void throttler.throttle(0).then(() => (zeroDone = true));
    await clock.advance(0);
    assert.equal(zeroDone, true, "throttle(0) did not wait behind throttle(5)");
    assert.equal(throttler.tryAcquire(0), true);
    assert.equal(throttler.stats().queuedRequests, 1);
    throttler.close();
  });

  it("release() on a closed client hands the quota back to the remote instead of a pool nobody uses", () => {
    const clock = new ManualClock();
    const { remote, released } = scriptedRemote();
    const throttler = new PrefetchingThrottler(config(), remote, clock, "api");
    throttler.close();
    throttler.release(7);
    assert.deepEqual(released, [7]);
    assert.equal(throttler.stats().available, 0);
    assert.equal(throttler.stats().returned, 7);
  });
});
