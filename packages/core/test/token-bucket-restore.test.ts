import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, QuotaBucketDriver, SluiceError, TokenBucket, quotaBucketConfig } from "../src/index.ts";

// docs/design.md §5.2: a controller that takes over (or restarts) restores each bucket's persisted balance,
// so it is never fuller than that balance plus what accrued since it was taken.
describe("TokenBucket.restore", () => {
  it("takes the persisted balance and refills only from the time it was taken", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 10_000 }, 5_000);
    assert.equal(bucket.balanceAt(5_000), 100); // a new bucket starts full
    bucket.restore(20, 3_000, 5_000); // 20 left at t=3000, 2 s ago
    assert.equal(bucket.balanceAt(5_000), 40);
    assert.equal(bucket.balanceAt(6_000), 50);
    assert.equal(bucket.balanceAt(60_000), 100); // capacity still caps the refill
  });

  it("keeps debt, and clamps a balance above this bucket's capacity", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 1_000 }, 0);
    bucket.restore(-30, 0, 0);
    assert.equal(bucket.balanceAt(0), -30);
    assert.equal(bucket.canGrant(0), false);
    assert.equal(bucket.msUntilGrantable(0), 3_000);
    bucket.restore(500, 0, 0);
    assert.equal(bucket.balanceAt(0), 10);
  });

  it("treats a time stamp from the future (clock skew) as now, never as extra tokens", () => {
    const bucket = new TokenBucket({ limit: 10, periodMs: 10_000 }, 1_000);
    bucket.restore(5, 9_000, 1_000);
    assert.equal(bucket.balanceAt(1_000), 5);
    assert.equal(bucket.balanceAt(2_000), 15);
  });

  it("is a no-op for an unlimited bucket and for a balance that is not a number", () => {
    const unlimited = new TokenBucket({ limit: null, periodMs: 1_000 }, 0);
    unlimited.restore(3, 0, 0);
    assert.ok(unlimited.canGrant(0));
    const bucket = new TokenBucket({ limit: 10, periodMs: 1_000 }, 0);
    bucket.restore(Number.NaN, 0, 0);
    assert.equal(bucket.balanceAt(0), 10);
  });
});

describe("QuotaBucketDriver.restoreBalance", () => {
  it("delays a queued request until the restored debt is paid", async () => {
    const clock = new ManualClock(10_000);
    const driver = new QuotaBucketDriver("api", quotaBucketConfig({ limit: 10, periodMs: 1_000 }), clock);
    driver.restoreBalance(-10, 10_000); // the previous leader left 1 s of debt
    let granted = false;
    const grant = driver.acquire({ amount: 1, requestId: "r1" }).then((g) => {
      granted = true;
      return g;
    });
    await clock.advance(999);
    assert.equal(granted, false);
    await clock.advance(1);
    assert.equal((await grant).granted, 1);
    driver.close(new SluiceError("CONTROLLER_UNAVAILABLE", "the test is over"));
  });
});
