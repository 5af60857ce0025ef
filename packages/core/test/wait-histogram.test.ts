import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RECENT_MAX_WINDOW_MS, WaitHistogram } from "../src/index.ts";

describe("WaitHistogram", () => {
  it("reports the longest wait of the last minute (within one 10 s slot), not of all time", () => {
    assert.equal(RECENT_MAX_WINDOW_MS, 60_000);
    const waits = new WaitHistogram();
    waits.record(5_000, 1_000); // one bad moment at start
    waits.record(40, 30_000);
    assert.equal(waits.view(30_000).maxMs, 5_000);
    assert.equal(waits.view(60_000).maxMs, 5_000, "still inside the window");
    assert.equal(waits.view(70_001).maxMs, 40, "the 5 s wait left the window; the 40 ms one is recent");
    assert.equal(waits.view(100_001).maxMs, 0, "nothing in the last minute");
    const { count, sumMs, buckets } = waits.view(100_001);
    assert.deepEqual({ count, sumMs }, { count: 2, sumMs: 5_040 }, "count and sum stay cumulative");
    assert.equal(buckets.at(-1), 2);
  });

  it("absorbs another histogram: cumulative figures add up, recent maxima keep their own times", () => {
    const total = new WaitHistogram();
    total.record(10, 50_000);
    const finished = new WaitHistogram();
    finished.record(900, 5_000);
    finished.record(300, 45_000);
    total.absorb(finished);
    const view = total.view(50_000);
    assert.deepEqual([view.count, view.sumMs, view.maxMs], [3, 1_210, 900]);
    assert.equal(total.view(80_000).maxMs, 300, "the 900 ms wait at 5 s aged out; the 300 ms one at 45 s did not");
    assert.equal(total.view(120_000).maxMs, 0);
    total.record(7, 120_000);
    assert.equal(total.view(120_000).maxMs, 7);
  });
});
