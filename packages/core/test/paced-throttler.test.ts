import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, PacedThrottler, isSluiceError, type PacedConfig, type PacedQuotaRemote, type PaceSchedule } from "../src/index.ts";

const config: PacedConfig = { targetRps: 1, minPrefetchAmount: 1, maxPrefetchAmount: 10, windowMs: 10_000, slotExpiryMs: 20 };

/** A remote that answers after `latencyMs` with the next slots of one timeline, `intervalMs` apart. */
function remote(clock: ManualClock, intervalMs: number, latencyMs = 5) {
  const calls: number[] = [];
  let cursorAt = 0;
  const paced: PacedQuotaRemote = {
    async acquirePaced(amount, signal): Promise<PaceSchedule> {
      calls.push(amount);
      await clock.sleep(latencyMs, signal);
      const startAt = Math.max(clock.now(), cursorAt);
      cursorAt = startAt + amount * intervalMs;
      return { startDelayMs: startAt - clock.now(), intervalMs };
    },
  };
  return { paced, calls };
}

describe("PacedThrottler (docs/design.md §11.1)", () => {
  it("hands units out one slot apart, in order, never earlier", async () => {
    const clock = new ManualClock();
    const { paced, calls } = remote(clock, 100);
    const throttler = new PacedThrottler(config, paced, clock, "pdf");
    const times: number[] = [];
    const all = Promise.all([1, 2, 3, 4].map(() => throttler.throttle(1).then(() => times.push(clock.now()))));
    await clock.advance(1_000);
    await all;
    assert.ok(calls.length >= 1);
    for (let i = 1; i < times.length; i++) {
      const gap = (times[i] ?? 0) - (times[i - 1] ?? 0);
      assert.ok(gap >= 100 - 1e-6, `units ${i - 1} and ${i} were ${gap} ms apart, slots are 100 ms apart (${times.join(", ")})`);
    }
  });

  it("lets unused slots expire instead of handing them out in a burst later", async () => {
    const clock = new ManualClock();
    const { paced } = remote(clock, 10);
    const throttler = new PacedThrottler({ ...config, minPrefetchAmount: 5 }, paced, clock, "pdf");
    // A caller back as soon as it was served is a backlog: the client asks ahead (5 slots, 10 ms apart)…
    const backlog = throttler.throttle(1).then(() => throttler.throttle(1));
    await clock.advance(50);
    await backlog;
    // …and then the callers stop.
    await clock.advance(500);
    assert.equal(throttler.tryAcquire(2), false, "no saved-up units to burst with");
    const expired = throttler.stats().expired;
    assert.ok(expired >= 4, `the idle slots expired (${expired})`);
  });

  it("gives nothing back on release, and aborting a waiter removes it", async () => {
    const clock = new ManualClock();
    const { paced } = remote(clock, 100);
    const throttler = new PacedThrottler(config, paced, clock, "pdf");
    throttler.release(5);
    assert.equal(throttler.tryAcquire(1), false, "released units are not usable");
    const abort = new AbortController();
    const waiting = throttler.throttle(3, { signal: abort.signal });
    abort.abort(new Error("stop"));
    await assert.rejects(waiting, (error: unknown) => isSluiceError(error, "CANCELLED"));
    assert.equal(throttler.stats().queuedRequests, 0);
    throttler.close();
    await assert.rejects(throttler.throttle(1), (error: unknown) => isSluiceError(error, "CANCELLED"));
  });

  it("asks for a deficit above the cap in several answers", async () => {
    const clock = new ManualClock();
    const { paced, calls } = remote(clock, 1);
    const throttler = new PacedThrottler(config, paced, clock, "pdf");
    let done = false;
    void throttler.throttle(25).then(() => (done = true));
    await clock.advanceUntil(() => done, 10, 5_000);
    assert.equal(done, true);
    assert.ok(
      calls.every((amount) => amount <= 10),
      `answers at most the cap: ${calls.join(", ")}`,
    );
  });

  it("8 backlogged clients at 1,000 units/s take every slot, and refills stay whole, about one per request_period", async () => {
    // Slots 1000 / 960 ms apart are not exact doubles: the float residue of counting them once made
    // whole slots expire under waiting callers and refills ask for 1e-9 units (an RPC storm when
    // answered at once; 2.45 RPCs per client per request_period here).
    const clock = new ManualClock(1_000_000);
    const { paced, calls } = remote(clock, 1000 / 960, 1);
    const clientConfig: PacedConfig = { targetRps: 2, minPrefetchAmount: 1, maxPrefetchAmount: 500, windowMs: 5_000, slotExpiryMs: 20.8 };
    const clients = Array.from({ length: 8 }, () => new PacedThrottler(clientConfig, paced, clock, "pdf"));
    let running = true;
    let handed = 0;
    const loops = clients.map(async (client) => {
      while (running) {
        await client.throttle(1);
        handed += 1;
      }
    });
    await clock.advance(20_000);
    running = false;
    const expired = clients.reduce((sum, client) => sum + client.stats().expired, 0);
    for (const client of clients) client.close();
    await Promise.all(loops.map((loop) => loop.catch(() => undefined)));
    assert.equal(expired, 0, "no slot expired under a waiting caller");
    assert.ok(handed >= 0.98 * 19_200, `${handed} units in 20 s at 960 slots/s`);
    assert.ok(
      calls.every((amount) => amount >= 1),
      `refills ask for whole amounts: ${calls
        .filter((a) => a < 1)
        .slice(0, 5)
        .join(", ")}`,
    );
    const perPeriod = calls.length / 8 / 40;
    assert.ok(perPeriod <= 1.5, `${perPeriod.toFixed(2)} refills per client per request_period (500 ms)`);
  });
});
