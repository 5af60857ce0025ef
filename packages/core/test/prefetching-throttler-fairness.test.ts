// Clients of one class at one lag timestamp share a bounded throttler about equally, however they
// started: the controller serves them in arrival order, so each one's share follows the size of the
// refills it asks for, and the refill size must not lock in whatever imbalance the start left.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, PrefetchingThrottler, QuotaBucketDriver, quotaBucketConfig, type QuotaRemote } from "../src/index.ts";

function sharedBucket(clock: ManualClock, limit: number, latencyMs: number) {
  const driver = new QuotaBucketDriver("shared", quotaBucketConfig({ limit, periodMs: 1000 }), clock);
  const remote: QuotaRemote = {
    async acquire(amount, signal) {
      await clock.sleep(latencyMs / 2, signal);
      await driver.acquire({ amount, signal });
      await clock.sleep(latencyMs / 2, signal);
    },
    release(amount) {
      driver.release(amount);
    },
  };
  return remote;
}

/** One job-like client: throttle(1) in a loop from `startMs` to `stopMs`, counting what it got. */
function client(clock: ManualClock, remote: QuotaRemote, startMs: number, stopMs: number) {
  // limit 200/s, request_period 200 ms: the runtime's window is max(10 × 200 ms, 1 s)
  const throttler = new PrefetchingThrottler({ targetRps: 5, minPrefetchAmount: 1, maxPrefetchAmount: 40, windowMs: 2000 }, remote, clock, "shared");
  const counts = { total: 0, steady: 0 };
  const done = (async () => {
    await clock.sleep(startMs);
    while (clock.now() < stopMs) {
      await throttler.throttle(1);
      counts.total += 1;
      if (clock.now() >= stopMs - 6000) counts.steady += 1;
    }
    throttler.close();
  })();
  return { counts, done };
}

describe("PrefetchingThrottler fairness among clients of one class", () => {
  for (const latencyMs of [2, 20]) {
    it(`three clients, one joining 1.5 s late, converge to about a third each (round trip ${latencyMs} ms)`, async () => {
      const clock = new ManualClock();
      const remote = sharedBucket(clock, 200, latencyMs);
      const clients = [client(clock, remote, 1500, 16_000), client(clock, remote, 0, 16_000), client(clock, remote, 0, 16_000)];
      await clock.advance(17_000);
      await Promise.all(clients.map((c) => c.done));
      const steady = clients.map((c) => c.counts.steady);
      const sum = steady.reduce((a, b) => a + b, 0);
      // the last 6 s: 200/s shared by three
      assert.ok(Math.abs(sum - 1200) <= 1200 * 0.03, `steady total ${sum}`);
      for (const [i, got] of steady.entries()) {
        assert.ok(Math.abs(got - sum / 3) <= (sum / 3) * 0.1, `client ${i} got ${got} of ${sum} in the steady 6 s: ${steady.join(", ")}`);
      }
    });
  }
});
