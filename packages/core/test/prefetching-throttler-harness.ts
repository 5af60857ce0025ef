// Test helpers for PrefetchingThrottler in virtual time: a remote backed by a real QuotaBucket, a remote
// whose refills land when the test says so, the prefetch config of the tests, a seeded random source.
import assert from "node:assert/strict";
import { type ManualClock, QuotaBucketDriver, quotaBucketConfig, type PrefetchConfig, type QuotaRemote } from "../src/index.ts";

/** A remote backed by a real QuotaBucket in virtual time, with a fixed round-trip latency. */
export function bucketRemote(clock: ManualClock, limit: number | null, latencyMs = 5) {
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

export const config = (overrides: Partial<PrefetchConfig> = {}): PrefetchConfig => ({
  targetRps: 1, // request_period 1 s
  minPrefetchAmount: 1,
  maxPrefetchAmount: 1000, // limit 1000/s × 1 s
  windowMs: 10_000,
  ...overrides,
});

/** A remote whose refills land only when the test says so, oldest first; what comes back is recorded. */
export function steppedRemote() {
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
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}
