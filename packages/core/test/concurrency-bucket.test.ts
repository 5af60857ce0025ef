import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { quotaBucketConfig } from "../src/index.ts";
import { granted, makeBucket, request } from "./quota-bucket-harness.ts";

// A concurrency throttler (docs/design.md §11.2) is the same queue machinery over a different unit source:
// `limit` units in use at once, back by release, never refilled by time.

const concurrency = (limit: number | null, extra = {}) => makeBucket({ kind: "concurrency", limit, periodMs: 1000, ...extra });

describe("QuotaBucket: concurrency kind", () => {
  it("never has more than limit units in use; a release lets the next waiter in, in lag order", () => {
    const bucket = concurrency(3);
    for (let i = 0; i < 5; i++) bucket.submit(request(`r${i}`, 1, { timestampMs: 100 - i }), 0);
    assert.deepEqual(granted(bucket.poll(0)), ["r4", "r3", "r2"]);
    assert.equal(bucket.snapshot(0).inUse, 3);
    // Time alone frees nothing.
    assert.equal(bucket.nextWakeAt(0), null);
    assert.deepEqual(bucket.poll(3_600_000), []);
    bucket.release(1, "", 10);
    assert.deepEqual(granted(bucket.poll(10)), ["r1"]);
    assert.equal(bucket.snapshot(10).inUse, 3);
  });

  it("a request must fit whole: 2 units wait while only 1 is free, and keep their place", () => {
    const bucket = concurrency(3);
    bucket.submit(request("a", 2), 0);
    bucket.submit(request("b", 2), 0);
    bucket.submit(request("c", 1), 0);
    assert.deepEqual(granted(bucket.poll(0)), ["a"]);
    bucket.release(2, "", 5);
    assert.deepEqual(granted(bucket.poll(5)), ["b", "c"]);
    assert.equal(bucket.snapshot(5).inUse, 3);
  });

  it("lowering the limit below what is in use takes effect as units come back", () => {
    const bucket = concurrency(4);
    for (let i = 0; i < 6; i++) bucket.submit(request(`r${i}`, 1), 0);
    assert.equal(granted(bucket.poll(0)).length, 4);
    bucket.reconfigure(quotaBucketConfig({ kind: "concurrency", limit: 2 }), 1);
    bucket.release(1, "", 2);
    assert.deepEqual(bucket.poll(2), [], "3 in use, limit 2: nobody enters");
    bucket.release(2, "", 3);
    assert.equal(granted(bucket.poll(3)).length, 1);
    assert.equal(bucket.snapshot(3).inUse, 2);
  });

  it("tryAcquire takes units only when they fit and nobody waits; unlimited grants everything", () => {
    const bucket = concurrency(2);
    assert.equal(bucket.tryAcquire(2, "", 0), true);
    assert.equal(bucket.tryAcquire(1, "", 0), false);
    bucket.release(5, "", 1);
    assert.equal(bucket.snapshot(1).inUse, 0, "a release beyond what is held stops at zero");
    const open = concurrency(null);
    for (let i = 0; i < 100; i++) open.submit(request(`r${i}`, 1), 0);
    assert.equal(granted(open.poll(0)).length, 100);
  });

  it("weighted classes share the units in use by weight while both are backlogged", () => {
    const bucket = concurrency(4, { classWeights: { heavy: 3, light: 1 } });
    for (let i = 0; i < 20; i++) {
      bucket.submit(request(`h${i}`, 1, { classId: "heavy" }), 0);
      bucket.submit(request(`l${i}`, 1, { classId: "light" }), 0);
    }
    const first = granted(bucket.poll(0));
    // Units come back one at a time, each to the class SFQ picks.
    const served: string[] = [...first];
    for (let t = 1; t <= 12; t++) {
      bucket.release(1, "", t);
      served.push(...granted(bucket.poll(t)));
    }
    const heavy = served.filter((id) => id.startsWith("h")).length;
    const light = served.filter((id) => id.startsWith("l")).length;
    assert.ok(heavy >= 2.5 * light && heavy <= 3.5 * light, `heavy ${heavy}, light ${light}`);
  });
});
