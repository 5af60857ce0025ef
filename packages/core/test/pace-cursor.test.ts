import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CALLER_DELAY_MARGIN_MS,
  PaceCursor,
  SlotSchedule,
  paceLeadMs,
  paceReachMs,
  slotExpiryMs,
  smoothDispatchGuardMs,
  smoothToleranceMs,
} from "../src/index.ts";

describe("PaceCursor (docs/design.md §11.1)", () => {
  const config = { limit: 10, requestPeriodMs: 1000 };

  it("starts one reach ahead, so slots a predecessor answered are never overlapped", () => {
    const cursor = new PaceCursor(config, 5_000);
    // lead 250 ms + the longest answer, ceil(10 × 1 s) = 10 units at 9.6/s.
    assert.ok(Math.abs(paceReachMs(config) - (250 + (10 * 1000) / 9.6)) < 1e-9);
    assert.equal(cursor.nextSlotAt, 5_000 + paceReachMs(config));
    assert.equal(cursor.canAnswer(5_000), false);
    assert.ok(Math.abs((cursor.msUntilAnswerable(5_000) ?? 0) - (paceReachMs(config) - paceLeadMs(config))) < 1e-9);
  });

  it("gives consecutive grants consecutive slots 1/(0.96 × limit) apart", () => {
    const cursor = new PaceCursor(config, 0);
    const now = cursor.nextSlotAt;
    const first = cursor.reserve(3, now);
    const second = cursor.reserve(2, now);
    assert.equal(first.startAt, now);
    assert.equal(first.intervalMs, 1000 / 9.6);
    assert.equal(second.startAt, now + 3 * (1000 / 9.6));
    // The cursor is past the lead now: the next grant waits.
    assert.equal(cursor.canAnswer(now), false);
    assert.equal(cursor.canAnswer(now + 5 * (1000 / 9.6) - paceLeadMs(config)), true);
  });

  it("never starts a slot in the past after an idle spell, and applies a new limit to new slots only", () => {
    const cursor = new PaceCursor(config, 0);
    const late = cursor.nextSlotAt + 60_000;
    assert.equal(cursor.reserve(1, late).startAt, late);
    cursor.reconfigure({ limit: 20, requestPeriodMs: 1000 });
    const next = cursor.reserve(1, late);
    assert.equal(next.startAt, late + 1000 / 9.6, "the slot answered at the old rate keeps its length");
    assert.equal(next.intervalMs, 1000 / 19.2);
  });

  it("grants nothing at limit 0 and everything at once when unlimited", () => {
    const zero = new PaceCursor({ limit: 0, requestPeriodMs: 1000 }, 0);
    assert.equal(zero.canAnswer(1e9), false);
    assert.equal(zero.msUntilAnswerable(0), null);
    const unlimited = new PaceCursor({ limit: null, requestPeriodMs: 1000 }, 0);
    assert.equal(unlimited.canAnswer(0), true);
    assert.deepEqual(unlimited.reserve(100, 7), { startAt: 7, intervalMs: 0 });
  });

  it("leaves room for 41.7 ms of lateness in a 1 s window", () => {
    assert.ok(Math.abs(smoothToleranceMs(1000) - 41.666) < 0.01);
    // Slots 1/9.6 s apart over 1 s + tolerance: fewer than 10 gaps, so at most 10 slots.
    assert.ok((1000 + smoothToleranceMs(1000) - 1e-9) * 0.0096 < 10);
  });

  it("keeps a dispatch guard of the tolerance for the caller's own delay, at any period", () => {
    // At 1 s: a quarter of the 41.7 ms tolerance (10.4 ms) is the guard, 5 % the bound's own error, 29.2 ms the expiry.
    assert.ok(Math.abs(smoothDispatchGuardMs(1000) - smoothToleranceMs(1000) / 4) < 1e-9);
    assert.ok(Math.abs(slotExpiryMs(1000) - smoothToleranceMs(1000) * 0.7) < 1e-9, "70 % of the tolerance at 1 s");
    // The guard, the expiry and the error together fit the tolerance: a unit up to the expiry late,
    // its call up to the guard later still, never puts limit × period + 1 in a closed window.
    assert.ok(slotExpiryMs(1000) + smoothDispatchGuardMs(1000) < smoothToleranceMs(1000));
    // At 100 ms a quarter would be 1.04 ms: the guard keeps 1.5 ms.
    assert.equal(smoothDispatchGuardMs(100), CALLER_DELAY_MARGIN_MS);
    assert.ok(Math.abs(slotExpiryMs(100) - (smoothToleranceMs(100) * 0.95 - CALLER_DELAY_MARGIN_MS)) < 1e-9);
    assert.equal(slotExpiryMs(10), 0, "a period whose whole tolerance is below the guard: units are handed out at their slot or not at all");
  });
});

describe("SlotSchedule", () => {
  it("makes unit i available at start + i × interval, never earlier", () => {
    const slots = new SlotSchedule(20);
    slots.add(100, 50, 3);
    assert.equal(slots.available(99), 0);
    assert.equal(slots.available(100), 1);
    assert.equal(slots.timeWhenAvailable(2, 100), 150);
    assert.equal(slots.timeWhenAvailable(3, 100), 200);
    assert.equal(slots.timeWhenAvailable(4, 100), null);
    assert.equal(slots.upcoming(100), 2);
  });

  it("expires units nobody took within the expiry, and they are never handed out", () => {
    const slots = new SlotSchedule(20);
    slots.add(0, 50, 4);
    assert.equal(slots.expire(110), 2, "slots 0 and 50 are older than 110 − 20");
    assert.ok(Math.abs(slots.available(110) - 1.2) < 1e-9, "slot 100 is still fresh (and 0.2 of the next accrued)");
    slots.take(1, 110);
    assert.equal(slots.timeWhenAvailable(1, 110), 150);
  });

  it("paces fractional amounts continuously", () => {
    const slots = new SlotSchedule(1_000);
    slots.add(0, 10, 2.5);
    assert.equal(slots.available(0), 1);
    assert.equal(slots.available(5), 1.5);
    assert.equal(slots.timeWhenAvailable(2.5, 0), 15);
  });

  it("takes an answer's travel off its slots' expiry: lateness already spent on the way is not spent again", () => {
    const trusted = new SlotSchedule(20);
    trusted.add(0, 10, 3);
    assert.equal(trusted.expire(6), 0, "slot 0 is 6 ms old, within 20 ms");
    const late = new SlotSchedule(20);
    late.add(0, 10, 3, 15);
    assert.equal(late.expire(6), 1, "the answer may have been 15 ms late already: 5 ms were left for slot 0");
    assert.ok(Math.abs(late.available(6) - 0.6) < 1e-9, "slot 1 accrues as before");
    const lost = new SlotSchedule(20);
    assert.equal(lost.add(0, 10, 2, 25), 2, "an answer that may have travelled longer than the expiry is lost whole");
    assert.equal(lost.available(0), 0, "not even at its first slot: that slot may already be 25 ms old");
    assert.equal(lost.upcoming(0), 0);
    assert.equal(lost.shortestExpiryMs(), null);
    const justInTime = new SlotSchedule(20);
    assert.equal(justInTime.add(0, 10, 2, 20), 0, "travel equal to the expiry leaves each slot usable at its time");
    assert.equal(justInTime.available(0), 1);
  });
});
