import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RateWindow } from "../src/index.ts";

describe("RateWindow", () => {
  it("reads a steady rate as itself at any phase of its slots, not up to one slot more", () => {
    // 300 units/s as 3 units every 10 ms, read every 7 ms (all phases of the 250 ms slots) for 14 s.
    const window = new RateWindow(5000, 250);
    let low = Number.POSITIVE_INFINITY;
    let high = 0;
    for (let t = 0; t <= 20_000; t += 1) {
      if (t % 10 === 0) window.add(3, t);
      if (t >= 6000 && t % 7 === 0) {
        const rate = window.rate(t);
        low = Math.min(low, rate);
        high = Math.max(high, rate);
      }
    }
    // Counting the oldest, partly expired slot against windowMs alone read up to 315/s here.
    assert.ok(low >= 299 && high <= 301, `a steady 300/s read as ${low.toFixed(1)}…${high.toFixed(1)}/s`);
  });

  it("forgets what left the window", () => {
    const window = new RateWindow(1000, 100);
    window.add(500, 0);
    assert.ok(window.rate(50) > 0);
    assert.equal(window.rate(1_200), 0);
  });
});
