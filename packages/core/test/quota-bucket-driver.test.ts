import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LocalThrottler, ManualClock, QuotaBucketDriver, SluiceError, isSluiceError, quotaBucketConfig } from "../src/index.ts";

function driver(clock: ManualClock, overrides: Parameters<typeof quotaBucketConfig>[0]) {
  return new QuotaBucketDriver("api", quotaBucketConfig(overrides), clock);
}

describe("QuotaBucketDriver (virtual time)", () => {
  it("grants the burst at once and the rest at the limit, waking only when a grant is due", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 10, periodMs: 1000 });
    const grantTimes: number[] = [];
    const all = Array.from({ length: 30 }, (_, i) => d.acquire({ amount: 1, requestId: `r${i}` }).then(() => grantTimes.push(clock.now())));
    await clock.advance(0);
    // Each was granted as it came, so the 11th found nobody waiting: at a balance of exactly 0 it
    // waits for a positive one (docs/design.md §9.1), which the next millisecond of refill brings.
    assert.equal(grantTimes.length, 10, "10 from the full bucket, none at balance 0");
    await clock.advance(1);
    assert.deepEqual(grantTimes.slice(10), [1], "the 11th, 1 ms later, leaving a debt of 0.99");
    await clock.advance(1899);
    assert.equal(grantTimes.length, 30);
    await Promise.all(all);
    // after the burst, exactly one grant every 100 ms: no drain period, no polling
    assert.deepEqual(grantTimes.slice(11, 15), [100, 200, 300, 400]);
    assert.equal(clock.pendingTimers, 0, "nothing scheduled when nothing waits");
  });

  it("sleeps with no timer at all while idle or at limit 0", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 0 });
    const waiting = d.acquire({ amount: 1 });
    await clock.advance(10_000);
    assert.equal(clock.pendingTimers, 0);
    d.reconfigure(quotaBucketConfig({ limit: null }));
    assert.deepEqual(await waiting, { granted: 1, waitedMs: 10_000 });
  });

  it("rejects with QUOTA_TIMEOUT at the deadline, and a retry with the same id resumes", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 1, periodMs: 1000 });
    await d.acquire({ amount: 2 }); // balance -1
    const first = d.acquire({ amount: 1, requestId: "job-1", deadlineAt: 500, onAbort: "detach" });
    const rejected = assert.rejects(first, (e: unknown) => isSluiceError(e, "QUOTA_TIMEOUT") && e.retriable);
    await clock.advance(600);
    await rejected;
    const later = d.acquire({ amount: 1, requestId: "job-2" });
    const retry = d.acquire({ amount: 1, requestId: "job-1" });
    const order: string[] = [];
    void later.then(() => order.push("job-2"));
    void retry.then(() => order.push("job-1"));
    await clock.advance(3000);
    assert.deepEqual(order, ["job-1", "job-2"], "the retry went back to its original place");
  });

  it("an aborted caller leaves at once and its grant is refunded", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 10, periodMs: 1000, maxGrantAmount: 5 });
    await d.acquire({ amount: 10 }); // empty bucket
    const controller = new AbortController();
    const big = d.acquire({ amount: 50, signal: controller.signal });
    await clock.advance(1000); // chunks of 5 at 0, 500 and 1000 ms (pay-after at balance 0)
    assert.equal(d.snapshot().counters.granted, 25);
    controller.abort(new Error("job stopped"));
    await assert.rejects(big, (e: unknown) => isSluiceError(e, "CANCELLED") && /job stopped/.test(e.message));
    assert.equal(d.snapshot().counters.refunded, 15);
    assert.equal(d.snapshot().pendingRequests, 0);
  });

  it("settles two live requests with the same id together, granting once", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 0 });
    const a = d.acquire({ amount: 4, requestId: "same" });
    const b = d.acquire({ amount: 4, requestId: "same" });
    d.reconfigure(quotaBucketConfig({ limit: null }));
    assert.deepEqual(await a, await b);
    assert.equal(d.snapshot().counters.granted, 4);
  });

  it("keeps a joined request alive when only one of its callers aborts", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 0 });
    const controller = new AbortController();
    const a = d.acquire({ amount: 1, requestId: "x", signal: controller.signal, onAbort: "detach" });
    const b = d.acquire({ amount: 1, requestId: "x" });
    controller.abort();
    await assert.rejects(a, (e: unknown) => isSluiceError(e, "CANCELLED"));
    d.reconfigure(quotaBucketConfig({ limit: null }));
    assert.equal((await b).granted, 1);
  });

  it("close fails every waiter with the given error and refuses later requests", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 0 });
    const waiting = d.acquire({ amount: 1 });
    d.close(new SluiceError("CONTROLLER_UNAVAILABLE", "controller is shutting down"));
    await assert.rejects(waiting, (e: unknown) => isSluiceError(e, "CONTROLLER_UNAVAILABLE"));
    await assert.rejects(d.acquire({ amount: 1 }), (e: unknown) => isSluiceError(e, "CONTROLLER_UNAVAILABLE"));
    assert.equal(clock.pendingTimers, 0);
  });
});

describe("LocalThrottler", () => {
  it("throttles, tries and releases against an in-process bucket with its class and priority", async () => {
    const clock = new ManualClock();
    const d = driver(clock, { limit: 10, periodMs: 1000, classWeights: { vip: 1 } });
    const throttler = new LocalThrottler(d, { classId: "vip", priority: () => 42 });
    assert.ok(throttler.tryAcquire(10));
    assert.equal(throttler.tryAcquire(1), false);
    const waiting = throttler.throttle(5);
    await clock.advance(500);
    await waiting;
    throttler.release(3);
    const vip = d.snapshot().classes.find((c) => c.id === "vip");
    assert.equal(vip?.granted, 15);
    assert.equal(vip?.released, 3);
    await assert.rejects(throttler.throttle(-1), (e: unknown) => isSluiceError(e, "INVALID_AMOUNT"));
    // its priority is the lag timestamp of its requests: behind a debt, the older job goes first
    const lagging = new LocalThrottler(d, { classId: "vip", priority: () => 7 });
    const order: string[] = [];
    const debt = throttler.throttle(100); // pay-after: leaves a debt of about 9 s, so both below queue
    await clock.advance(1000);
    await debt;
    assert.ok((d.snapshot().balance ?? 0) < -50);
    const late = throttler.throttle(1).then(() => order.push("priority 42"));
    const early = lagging.throttle(1).then(() => order.push("priority 7"));
    await clock.advance(20_000);
    await Promise.all([late, early]);
    assert.deepEqual(order, ["priority 7", "priority 42"], "submitted second, served first: smaller lag timestamp");
  });
});

describe("QuotaBucketDriver: a request granted on arrival", () => {
  it("reports 0 ms waited even when the clock moves between two reads (a loaded machine)", async () => {
    // Every read of this clock is 0.7 ms after the one before, as a preempted process would see.
    const manual = new ManualClock();
    let reads = 0;
    const creeping = { now: () => manual.now() + 0.7 * reads++, sleep: manual.sleep.bind(manual) };
    const d = new QuotaBucketDriver("api", quotaBucketConfig({ limit: 100, periodMs: 1000 }), creeping);
    const grant = await d.acquire({ amount: 10, requestId: "at-once" });
    assert.equal(grant.granted, 10);
    assert.equal(grant.waitedMs, 0, "the grant was made at the request's own instant");
    d.close(new SluiceError("CONTROLLER_UNAVAILABLE", "test over"));
  });
});
