import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSluiceError, quotaBucketConfig } from "../src/index.ts";
import { assertClose, granted, makeBucket, request, runBacklog, runUntil, shares } from "./quota-bucket-harness.ts";

describe("QuotaBucket: token bucket behaviour", () => {
  it("grants the initial full bucket at once, then at the limit", () => {
    const bucket = makeBucket({ limit: 100, periodMs: 1000 });
    // 2,000 requests of 1 unit: 100 from the full bucket at t=0, then 100 per second
    for (let i = 0; i < 2000; i++) bucket.submit(request(`r${i}`, 1), 0);
    assert.equal(granted(bucket.poll(0)).length, 101, "the full bucket, plus one grant at balance exactly 0");
    const { settlements } = runUntil(bucket, 0, 10_000);
    assert.equal(granted(settlements).length, 1000);
  });

  it("grants nothing with limit 0, and asks for no wake-up", () => {
    const bucket = makeBucket({ limit: 0 });
    bucket.submit(request("a", 1), 0);
    assert.deepEqual(bucket.poll(0), []);
    assert.equal(bucket.nextWakeAt(0), null);
    assert.deepEqual(runUntil(bucket, 0, 3_600_000).settlements, []);
  });

  it("grants amount 0 at once even with limit 0", () => {
    const bucket = makeBucket({ limit: 0 });
    assert.deepEqual(bucket.submit(request("zero", 0), 0), { kind: "granted", requestId: "zero", amount: 0, waitedMs: 0 });
  });

  it("reconfiguring to unlimited releases every waiter", () => {
    const bucket = makeBucket({ limit: 0 });
    for (let i = 0; i < 50; i++) bucket.submit(request(`r${i}`, 10), 0);
    assert.deepEqual(bucket.poll(5), []);
    bucket.reconfigure(quotaBucketConfig({ limit: null }), 10);
    assert.equal(granted(bucket.poll(10)).length, 50);
    assert.equal(bucket.pending, 0);
  });

  it("raising the limit speeds up waiters already queued", () => {
    const bucket = makeBucket({ limit: 1, periodMs: 1000 });
    for (let i = 0; i < 21; i++) bucket.submit(request(`r${i}`, 1), 0);
    assert.equal(granted(bucket.poll(0)).length, 2);
    bucket.reconfigure(quotaBucketConfig({ limit: 10, periodMs: 1000 }), 0);
    const { settlements } = runUntil(bucket, 0, 2000);
    assert.equal(granted(settlements).length, 19, "the rest at 10/s within 2 s");
  });

  it("refuses invalid amounts with the figures", () => {
    const bucket = makeBucket({ limit: 10 });
    for (const amount of [-1, Number.NaN, Number.POSITIVE_INFINITY, 1e300]) {
      const admission = bucket.submit(request("bad", amount), 0);
      assert.equal(admission.kind, "refused");
      if (admission.kind !== "refused") continue;
      assert.equal(admission.error.code, "INVALID_AMOUNT");
      assert.match(admission.error.message, /throttler "api"/);
      assert.match(admission.error.message, amount === 1e300 ? /exceeds the largest single request/ : /finite number >= 0/);
    }
  });

  it("refuses beyond max_queue_size with the figures, and only then", () => {
    const bucket = makeBucket({ limit: 0, maxQueueSize: 3 });
    for (let i = 0; i < 3; i++) assert.equal(bucket.submit(request(`r${i}`, 1), 0).kind, "queued");
    const refused = bucket.submit(request("r3", 1), 0);
    assert.equal(refused.kind, "refused");
    if (refused.kind === "refused") {
      assert.ok(isSluiceError(refused.error, "QUEUE_FULL"));
      assert.equal(refused.error.retriable, true);
      assert.equal(refused.error.message, 'QUEUE_FULL: throttler "api" has 3 requests waiting (max_queue_size 3); retry with backoff');
    }
    assert.equal(bucket.snapshot(0).counters.refusedQueueFull, 1);
  });
});

describe("QuotaBucket: classes", () => {
  const chunked = { limit: 100, periodMs: 1000, maxGrantAmount: 10 };

  it("shares 3:1 among backlogged classes within ±1 % over 9,000 grants", () => {
    const bucket = makeBucket({ ...chunked, classWeights: { a: 3, b: 1 } });
    const result = runBacklog(bucket, ["a", "b"], { amount: 10, grants: 9000 });
    const s = shares(result.units);
    assertClose(s.get("a") ?? 0, 3 / 4, 0.01, "share of a");
    assertClose(s.get("b") ?? 0, 1 / 4, 0.01, "share of b");
  });

  it("shares 5:3:1 within ±1 % over 9,000 grants", () => {
    const bucket = makeBucket({ ...chunked, classWeights: { a: 5, b: 3, c: 1 } });
    const result = runBacklog(bucket, ["a", "b", "c"], { amount: 10, grants: 9000 });
    const s = shares(result.units);
    assertClose(s.get("a") ?? 0, 5 / 9, 0.01, "share of a");
    assertClose(s.get("b") ?? 0, 3 / 9, 0.01, "share of b");
    assertClose(s.get("c") ?? 0, 1 / 9, 0.01, "share of c");
  });

  it("gives an idle class's share to the active ones at once", () => {
    const bucket = makeBucket({ ...chunked, classWeights: { vip: 5, bulk: 1 } });
    const result = runBacklog(bucket, ["bulk"], { amount: 10, untilMs: 70_000, measureFromMs: 10_000 });
    assertClose((result.units.get("bulk") ?? 0) / 60, 100, 0.01, "bulk alone takes the whole 100/s");
  });

  it("serves a waking class before the next chunk of a long backlog, without banked credit", () => {
    const bucket = makeBucket({ ...chunked, classWeights: { a: 1, b: 1 } });
    const before = runBacklog(bucket, ["a"], { amount: 10, untilMs: 100_000 });
    let now = before.now;
    bucket.submit(request("b-wakes", 10, { classId: "b" }), now);
    // the next grant goes to b, though a has 3 requests waiting ahead of it in time
    let first: string | undefined;
    while (first === undefined) {
      first = granted(bucket.poll(now))[0];
      now = bucket.nextWakeAt(now) ?? now;
    }
    assert.equal(first, "b-wakes");
    // then both backlogged at equal weights: b does not catch up for its 100 s of idleness
    const after = runBacklog(bucket, ["a", "b"], { amount: 10, grants: 200, from: now });
    assertClose(shares(after.units).get("b") ?? 0, 0.5, 0.03, "b's share after waking");
  });

  it("changes later shares when weights change", () => {
    const bucket = makeBucket({ ...chunked, classWeights: { a: 3, b: 1 } });
    const before = runBacklog(bucket, ["a", "b"], { amount: 10, grants: 400 });
    bucket.reconfigure(quotaBucketConfig({ ...chunked, classWeights: { a: 1, b: 3 } }), before.now);
    const later = runBacklog(bucket, ["a", "b"], { amount: 10, grants: 4000, from: before.now });
    assertClose(shares(later.units).get("b") ?? 0, 0.75, 0.02, "b's share after reweighting");
  });

  it("lets a second class interleave with a chunked request, which resolves exactly once", () => {
    const bucket = makeBucket({ limit: 10, periodMs: 1000, maxGrantAmount: 10, classWeights: { big: 1, small: 1 } });
    bucket.submit(request("huge", 100, { classId: "big" }), 0);
    for (let i = 0; i < 5; i++) bucket.submit(request(`s${i}`, 10, { classId: "small" }), 0);
    const { settlements } = runUntil(bucket, 0, 20_000);
    const order = granted(settlements);
    assert.equal(order.filter((id) => id === "huge").length, 1, "resolved exactly once");
    // 5 small requests of 10 were served while huge (10 chunks) was in progress, not after it
    assert.ok(order.indexOf("s4") < order.indexOf("huge"), `order: ${order.join(", ")}`);
    assert.equal(bucket.snapshot(20_000).counters.granted, 150);
  });

  it("routes classless and unknown classes to default, counting them", () => {
    const bucket = makeBucket({ limit: null, classWeights: { vip: 2 } });
    bucket.submit(request("a", 1, { classId: "" }), 0);
    bucket.submit(request("b", 1, { classId: "nope" }), 0);
    bucket.submit(request("c", 1, { classId: "default" }), 0);
    bucket.poll(0);
    const snapshot = bucket.snapshot(0);
    assert.equal(snapshot.counters.classlessRequests, 1);
    assert.equal(snapshot.counters.unknownClassRequests, 1);
    assert.equal(snapshot.classes.find((c) => c.id === "default")?.granted, 3);
  });

  it("drains a class removed by reconfiguration, then forgets it", () => {
    const bucket = makeBucket({ limit: 1, periodMs: 1000, classWeights: { old: 1 } });
    for (let i = 0; i < 4; i++) bucket.submit(request(`o${i}`, 1, { classId: "old" }), 0);
    bucket.reconfigure(quotaBucketConfig({ limit: 1, periodMs: 1000 }), 0);
    bucket.submit(request("late", 1, { classId: "old" }), 0); // no longer accepted: goes to default
    assert.equal(bucket.snapshot(0).counters.unknownClassRequests, 1);
    const { settlements } = runUntil(bucket, 0, 10_000);
    assert.equal(granted(settlements).length, 5);
    assert.deepEqual(
      bucket.snapshot(10_000).classes.map((c) => c.id),
      ["default"],
    );
  });

  it("serves weights as absolute rates with use_class_weights_as_limit", () => {
    const bucket = makeBucket({ periodMs: 1000, useClassWeightsAsLimit: true, classWeights: { a: 5, b: 3, c: 1 } });
    assert.equal(bucket.snapshot(0).limit, 9);
    // measured over 100 s after the initial full bucket: a at 5/s, b at 3/s, c at 1/s
    const result = runBacklog(bucket, ["a", "b", "c"], { amount: 1, untilMs: 110_000, measureFromMs: 10_000 });
    assertClose((result.units.get("a") ?? 0) / 100, 5, 0.01, "rate of a (units/s)");
    assertClose((result.units.get("b") ?? 0) / 100, 3, 0.01, "rate of b (units/s)");
    assertClose((result.units.get("c") ?? 0) / 100, 1, 0.01, "rate of c (units/s)");
  });

  it("gives an idle class's rate to the others under use_class_weights_as_limit", () => {
    const bucket = makeBucket({ periodMs: 1000, useClassWeightsAsLimit: true, classWeights: { a: 5, b: 3, c: 1 } });
    const result = runBacklog(bucket, ["a", "b"], { amount: 1, untilMs: 110_000, measureFromMs: 10_000 });
    const total = (result.units.get("a") ?? 0) + (result.units.get("b") ?? 0);
    assertClose(total / 100, 9, 0.02, "a and b together take c's rate too");
    assertClose(shares(result.units).get("a") ?? 0, 5 / 8, 0.02, "a's share of the whole rate");
  });

  it("lets classless traffic compete at weight 1 on top of declared weights", () => {
    const bucket = makeBucket({ periodMs: 1000, useClassWeightsAsLimit: true, classWeights: { a: 5, b: 3, c: 1 } });
    const result = runBacklog(bucket, ["a", "b", "c", ""], { amount: 1, untilMs: 110_000, measureFromMs: 10_000 });
    assertClose((result.units.get("a") ?? 0) / 100, 4.5, 0.03, "a pushed below its weight");
    assertClose((result.units.get("") ?? 0) / 100, 0.9, 0.05, "classless at weight 1");
  });
});

describe("QuotaBucket: lag priority", () => {
  it("serves the smallest lag timestamp first inside a class, ties by arrival", () => {
    const bucket = makeBucket({ limit: 1, periodMs: 1000 });
    bucket.submit(request("first", 1), 0); // takes the full bucket
    bucket.poll(0);
    bucket.submit(request("drain", 1), 0); // found nobody waiting at balance 0: waits for a positive balance
    assert.deepEqual(bucket.poll(0), [], "not granted at a balance of exactly 0 with nothing queued (docs/design.md §9.1)");
    bucket.submit(request("t300", 1, { timestampMs: 300 }), 0);
    bucket.submit(request("t100", 1, { timestampMs: 100 }), 0);
    bucket.submit(request("t200a", 1, { timestampMs: 200 }), 0);
    bucket.submit(request("t200b", 1, { timestampMs: 200 }), 0);
    bucket.submit(request("t0", 1, { timestampMs: 0 }), 0); // no information yet: top priority
    const { settlements } = runUntil(bucket, 0, 10_000);
    // "drain" first (it was ahead of them all, granted 1 ms later with a balance just above 0), then lag order
    assert.deepEqual(granted(settlements), ["drain", "t0", "t100", "t200a", "t200b", "t300"]);
  });
});

describe("QuotaBucket: cancellation, deadlines and request ids", () => {
  it("refuses a request id sent again with another amount, waiting or granted, and answers the same amount as a retry", () => {
    const bucket = makeBucket({ limit: 1, periodMs: 1000 });
    bucket.submit(request("r1", 1), 0);
    assert.deepEqual(granted(runUntil(bucket, 0, 5).settlements), ["r1"]);
    const replay = bucket.submit(request("r1", 1), 10);
    assert.equal(replay.kind, "granted", "the same amount is a retry: replayed");
    const reused = bucket.submit(request("r1", 0.5), 20);
    assert.equal(reused.kind, "refused");
    if (reused.kind === "refused") {
      assert.ok(isSluiceError(reused.error, "INVALID_REQUEST"), String(reused.error));
      assert.match(reused.error.message, /request "r1" on throttler "api" was sent for amount 1 and now for 0\.5/);
    }
    assert.equal(bucket.submit(request("w", 5), 30).kind, "queued");
    assert.equal(bucket.submit(request("w", 5), 40).kind, "joined");
    assert.equal(bucket.submit(request("w", 6), 50).kind, "refused", "a waiting id with another amount too");
  });

  it("refunds exactly what a cancelled request was granted: tokens and virtual time", () => {
    const bucket = makeBucket({ limit: 10, periodMs: 1000, maxGrantAmount: 10, classWeights: { a: 1, b: 1 } });
    bucket.submit(request("big", 100, { classId: "a" }), 0);
    runUntil(bucket, 0, 2000); // chunks at 0 (balance 10 → 0), at 0 again (balance 0 → -10), at 1000, at 2000
    const before = bucket.snapshot(2000);
    const grantedSoFar = before.counters.granted;
    assert.equal(grantedSoFar, 40);
    const vtBefore = before.classes.find((c) => c.id === "a")?.virtualTime ?? 0;
    assert.equal(vtBefore, 40);
    assert.ok(bucket.cancel("big", 2000));
    const after = bucket.snapshot(2000);
    assert.equal(after.counters.refunded, 40);
    assert.equal(after.classes.find((c) => c.id === "a")?.refunded, 40);
    assert.equal(after.balance, 10, "40 tokens back, capped at the capacity of 10");
    assert.equal(after.pendingRequests, 0);
    assert.equal(after.pendingAmount, 0);
  });

  it("refunds a request whose deadline passed and tells the caller with QUOTA_TIMEOUT", () => {
    const bucket = makeBucket({ limit: 1, periodMs: 1000, maxGrantAmount: 1 });
    bucket.submit(request("slow", 5, { deadlineAt: 2500 }), 0);
    const { settlements } = runUntil(bucket, 0, 3000);
    assert.equal(settlements.length, 1);
    const [timeout] = settlements;
    assert.equal(timeout?.kind, "timed_out");
    if (timeout?.kind === "timed_out") {
      assert.equal(timeout.error.code, "QUOTA_TIMEOUT");
      assert.match(timeout.error.message, /waited 2500 ms on throttler "api".*retry with the same request id/);
    }
    const snapshot = bucket.snapshot(3000);
    assert.equal(snapshot.counters.granted, 4, "chunks at 0, 0, 1000, 2000");
    assert.equal(snapshot.counters.refunded, 4);
    assert.equal(snapshot.detachedRequests, 1);
    assert.equal(snapshot.pendingRequests, 0);
  });

  it("keeps a detached request's place: a retry with its id resumes ahead of later arrivals", () => {
    const bucket = makeBucket({ limit: 1, periodMs: 1000, detachedGraceMs: 10_000 });
    bucket.submit(request("warmup", 2), 0);
    bucket.poll(0); // balance 1 - 2 = -1
    bucket.submit(request("early", 1, { deadlineAt: 500 }), 0);
    bucket.submit(request("later", 1), 100);
    const first = runUntil(bucket, 100, 600);
    assert.deepEqual(
      first.settlements.map((s) => s.kind),
      ["timed_out"],
    );
    // while detached it is in nobody's way: "later" is granted when the debt is paid
    bucket.submit(request("after-that", 1), 600);
    const second = runUntil(bucket, 600, 1000);
    assert.deepEqual(granted(second.settlements), ["later"]);
    // the retry re-attaches "early" at its original place, ahead of "after-that"
    assert.equal(bucket.submit(request("early", 1), 1100).kind, "reattached");
    const third = runUntil(bucket, 1100, 5000);
    assert.deepEqual(granted(third.settlements), ["early", "after-that"]);
  });

  it("forgets a detached request after the grace period: a retry then queues as new", () => {
    const bucket = makeBucket({ limit: 0, detachedGraceMs: 1000 });
    bucket.submit(request("r", 1, { deadlineAt: 100 }), 0);
    runUntil(bucket, 0, 2000);
    assert.equal(bucket.snapshot(2000).detachedRequests, 0);
    assert.equal(bucket.submit(request("r", 1), 2000).kind, "queued");
  });

  it("joins a second live request with the same id: granted once", () => {
    const bucket = makeBucket({ limit: 0 });
    assert.equal(bucket.submit(request("same", 7), 0).kind, "queued");
    assert.equal(bucket.submit(request("same", 7), 1).kind, "joined");
    bucket.reconfigure(quotaBucketConfig({ limit: null }), 2);
    assert.deepEqual(granted(bucket.poll(2)), ["same"]);
    assert.equal(bucket.snapshot(2).counters.granted, 7);
  });

  it("answers a retry of an already granted id without granting again", () => {
    const bucket = makeBucket({ limit: 100, periodMs: 1000 });
    bucket.submit(request("once", 30), 0);
    assert.deepEqual(granted(bucket.poll(0)), ["once"]);
    const replay = bucket.submit(request("once", 30), 10);
    assert.equal(replay.kind, "granted");
    assert.equal(bucket.snapshot(10).counters.granted, 30);
    assert.equal(bucket.snapshot(10).counters.replayed, 1);
  });

  it("does not deduplicate requests without an id", () => {
    const bucket = makeBucket({ limit: null });
    bucket.submit(request("", 1), 0);
    bucket.submit(request("", 1), 0);
    assert.equal(granted(bucket.poll(0)).length, 2);
  });

  it("bounds detached requests like the queue", () => {
    const bucket = makeBucket({ limit: 0, maxQueueSize: 10 });
    for (let i = 0; i < 25; i++) {
      bucket.submit(request(`r${i}`, 1), 0);
      bucket.detach(`r${i}`, 0);
    }
    assert.equal(bucket.snapshot(0).detachedRequests, 10);
  });
});

describe("QuotaBucket: tryAcquire and release", () => {
  it("takes quota without queueing only while nobody waits and the balance is positive", () => {
    const bucket = makeBucket({ limit: 10, periodMs: 1000 });
    assert.ok(bucket.tryAcquire(15, "", 0), "pay-after: more than the balance");
    assert.equal(bucket.tryAcquire(1, "", 0), false);
    assert.ok(bucket.tryAcquire(1, "", 600));
    bucket.release(100, "", 600);
    assert.equal(bucket.snapshot(600).balance, 10);
    assert.equal(bucket.snapshot(600).counters.released, 100);
  });
});
