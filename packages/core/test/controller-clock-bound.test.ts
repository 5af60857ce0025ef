import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ControllerClockBound, DRIFT_PER_MS, paceScheduleOf } from "../src/index.ts";

// The bound a smooth client keeps on the controller's clock (θ = controller − local), from answers
// whose legs are timed by hand: true offset 5,000 ms.
const THETA = 5_000;

/** One answer: sent at `sentAt` (local), `up` ms to the controller, waits `waited`, `down` ms back. */
function sample(sentAt: number, up: number, waited: number, down: number) {
  const answeredAt = sentAt + up + waited + THETA;
  return { sentAt, receivedAt: sentAt + up + waited + down, answeredAt, waitedMs: waited };
}

describe("ControllerClockBound", () => {
  it("narrows to the fastest leg seen each way, and always holds the true offset", () => {
    const bound = new ControllerClockBound();
    // Slow both ways: the bound is the round trip less the wait, 80 ms wide.
    let b = bound.add(sample(0, 40, 120, 40));
    assert.ok(b.lo <= THETA && THETA <= b.hi);
    assert.equal(b.hi - b.lo, 80);
    // A fast way up, a slow way down, then the reverse: 1 + 1 ms left.
    b = bound.add(sample(1_000, 1, 100, 60));
    b = bound.add(sample(2_000, 70, 100, 1));
    assert.ok(b.lo <= THETA && THETA <= b.hi, `${b.lo}..${b.hi}`);
    // 2 ms, and what the clocks may have drifted since the narrowest answers (1 s and 2 s earlier).
    assert.ok(b.hi - b.lo <= 2 + 2 * 2_000 * DRIFT_PER_MS + 1e-9, `${b.hi - b.lo}`);
    // A later slow answer does not widen it (beyond drift).
    b = bound.add(sample(2_500, 50, 0, 50));
    assert.ok(b.hi - b.lo <= 2 + 2 * 2_600 * DRIFT_PER_MS + 1e-9);
  });

  it("widens with drift between answers", () => {
    const bound = new ControllerClockBound();
    bound.add(sample(0, 1, 0, 1));
    const later = bound.bound(10_000 + 2);
    assert.ok(Math.abs(later.hi - later.lo - (2 + 2 * 10_000 * DRIFT_PER_MS)) < 1e-6);
  });

  it("uses a retry's answer only from below, and ignores a wait longer than the round trip", () => {
    const bound = new ControllerClockBound();
    const retry = { ...sample(0, 5, 0, 5), waitedMs: null };
    assert.equal(bound.add(retry).hi, Number.POSITIVE_INFINITY);
    const reattached = bound.add({ ...sample(100, 5, 0, 5), waitedMs: 500 });
    assert.equal(reattached.hi, Number.POSITIVE_INFINITY);
    assert.ok(reattached.lo <= THETA);
  });

  it("starts over when an answer cannot be from the same clock (another controller)", () => {
    const bound = new ControllerClockBound();
    bound.add(sample(0, 1, 0, 1));
    const other = bound.add({ sentAt: 1_000, receivedAt: 1_002, answeredAt: 1_001 + 90_000, waitedMs: 0 });
    assert.ok(other.lo <= 90_000 && 90_000 <= other.hi);
  });
});

describe("paceScheduleOf", () => {
  it("places an answer's slots by the bound: never early, at most the bound's width late, whatever its own travel", () => {
    const bound = new ControllerClockBound();
    // Narrow the bound first (1 ms each way), then an answer that took 60 ms to come back.
    paceScheduleOf({ waitedMs: 0, paceStartDelayMs: 100, paceIntervalMs: 104, paceAnsweredAtMs: 0 + 1 + THETA }, bound, 0, 2, true);
    const sentAt = 1_000;
    const answeredAt = sentAt + 1 + THETA;
    const receivedAt = sentAt + 1 + 60;
    const schedule = paceScheduleOf({ waitedMs: 0, paceStartDelayMs: 120, paceIntervalMs: 104, paceAnsweredAtMs: answeredAt }, bound, sentAt, receivedAt, true);
    const placed = receivedAt + schedule.startDelayMs;
    const truth = answeredAt + 120 - THETA;
    assert.ok(placed >= truth - 1e-9, "never early");
    assert.ok(placed - truth <= (schedule.travelMs ?? 0) + 1e-9);
    assert.ok(
      (schedule.travelMs ?? Infinity) <= 2 + 2 * 1_000 * DRIFT_PER_MS + 1e-6,
      `late by at most the bound's width, not the 60 ms answer: ${schedule.travelMs}`,
    );
  });

  it("counts from the arrival, late by the travel, without the controller's answer time (an older controller)", () => {
    const schedule = paceScheduleOf({ waitedMs: 10, paceStartDelayMs: 50, paceIntervalMs: 100 }, new ControllerClockBound(), 0, 40, true);
    assert.deepEqual(schedule, { startDelayMs: 50, intervalMs: 100, travelMs: 30 });
  });
});
