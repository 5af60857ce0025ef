import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TokenBucket } from "../src/index.ts";

describe("TokenBucket", () => {
  it("starts full with capacity limit × period", () => {
    const bucket = new TokenBucket({ limit: 100, periodMs: 2000 }, 0);
    assert.equal(bucket.capacity, 200);
    assert.equal(bucket.balanceAt(0), 200);
  });

  it("pays after: grants any amount while the balance is non-negative, then the debt delays", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 1000 }, 0);
    assert.ok(bucket.canGrant(0));
    bucket.take(25, 0); // more than the balance of 10
    assert.equal(bucket.balanceAt(0), -15);
    assert.equal(bucket.canGrant(0), false);
    assert.equal(bucket.msUntilGrantable(0), 1500);
    assert.equal(bucket.canGrant(1499), false);
    assert.ok(bucket.canGrant(1500));
  });

  it("refills at limit per second up to capacity, never above", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 1000 }, 0);
    bucket.take(10, 0);
    assert.equal(bucket.balanceAt(500), 5);
    assert.equal(bucket.balanceAt(60_000), 10);
  });

  it("grants nothing with limit 0, ever", () => {
    const bucket = new TokenBucket({ limit: 0, periodMs: 1000 }, 0);
    assert.equal(bucket.canGrant(0), false);
    assert.equal(bucket.canGrant(1e9), false);
    assert.equal(bucket.msUntilGrantable(0), null);
  });

  it("grants everything at once when unlimited", () => {
    const bucket = new TokenBucket({ limit: null, periodMs: 1000 }, 0);
    bucket.take(1e12, 0);
    assert.ok(bucket.canGrant(0));
    assert.equal(bucket.msUntilGrantable(0), 0);
    assert.equal(bucket.capacity, Number.POSITIVE_INFINITY);
  });

  it("release returns tokens but never above capacity", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 1000 }, 0);
    bucket.take(30, 0);
    bucket.release(5, 0);
    assert.equal(bucket.balanceAt(0), -15);
    bucket.release(1000, 0);
    assert.equal(bucket.balanceAt(0), 10);
  });

  it("reconfigure keeps accrued tokens, clamped to the new capacity", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 10_000 }, 0);
    bucket.take(100, 0); // empty
    // 3 s at 10/s accrued = 30, then the rate doubles
    bucket.reconfigure({ limit: 20, periodMs: 10_000 }, 3000);
    assert.equal(bucket.balanceAt(3000), 30);
    assert.equal(bucket.balanceAt(4000), 50);
    bucket.reconfigure({ limit: 20, periodMs: 1000 }, 4000); // capacity 20 now
    assert.equal(bucket.balanceAt(4000), 20);
  });

  it("keeps debt across reconfiguration and starts full when leaving unlimited", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 1000 }, 0);
    bucket.take(50, 0); // -40
    bucket.reconfigure({ limit: 40, periodMs: 1000 }, 0);
    assert.equal(bucket.msUntilGrantable(0), 1000);
    const unlimited = new TokenBucket({ limit: null, periodMs: 1000 }, 0);
    unlimited.reconfigure({ limit: 5, periodMs: 2000 }, 100);
    assert.equal(unlimited.balanceAt(100), 10);
  });

  it("lets a caller that does not queue take quota only while the balance is positive", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 1000 }, 0);
    bucket.take(10, 0);
    assert.equal(bucket.canGrantWithoutQueue(0), false);
    assert.ok(bucket.canGrant(0), "a queued request is granted at exactly 0");
    assert.ok(bucket.canGrantWithoutQueue(1));
  });
});
