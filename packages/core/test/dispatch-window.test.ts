import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DispatchWindow, ManualClock, PacedThrottler, sharedDispatchWindow, type Clock, type PacedQuotaRemote, type PaceSchedule } from "../src/index.ts";

describe("DispatchWindow (docs/design.md §11.1: a client's own departures)", () => {
  it("admits limit × period departures in a closed window of period + guard, and says when the next may go", () => {
    const window = new DispatchWindow(10, 1010);
    for (let i = 0; i < 10; i++) {
      assert.equal(window.admits(1, i * 100), true);
      window.record(1, i * 100);
    }
    assert.equal(window.admits(1, 1000), false, "the 11th within 1,010 ms of the first");
    assert.equal(window.admits(1, 1010), false, "closed: a departure exactly span ago still counts");
    assert.ok(Math.abs(window.whenAdmits(1, 1000) - 1010) < 0.01);
    assert.equal(window.admits(1, 1010.01), true);
  });

  it("counts a departure from when its turn ended, so a stall after a hand-out holds the 11th back", () => {
    const window = new DispatchWindow(10, 1010);
    const first = window.record(1, 0);
    first.at = 60; // the process stalled 60 ms after handing it out: its call left at 60 at the latest
    for (let i = 1; i < 10; i++) window.record(1, i * 104.17);
    assert.equal(window.admits(1, 1041.7), false, "on its slot, the 11th would land 981.7 ms after the late one");
    assert.ok(window.whenAdmits(1, 1041.7) > 1070);
  });
});

/** A clock whose turns end `stallMs` after they begin (a process that stalls after each hand-out). */
function stallingClock(clock: ManualClock, stallMs: () => number): Clock {
  return {
    now: () => clock.now(),
    sleep: (ms, signal) => clock.sleep(ms, signal),
    afterTurn: (fire) => {
      void clock.sleep(stallMs()).then(fire);
    },
  };
}

describe("PacedThrottler with a window", () => {
  it("one backlogged client at limit 10: a call that left 60 ms late holds back the unit 10 slots later; no 11 departures in any closed 1,010 ms", async () => {
    const clock = new ManualClock(0);
    let cursorAt = 0;
    const intervalMs = 1000 / 9.6;
    const remote: PacedQuotaRemote = {
      async acquirePaced(amount, signal): Promise<PaceSchedule> {
        await clock.sleep(1, signal);
        const startAt = Math.max(clock.now(), cursorAt);
        cursorAt = startAt + amount * intervalMs;
        return { startDelayMs: startAt - clock.now(), intervalMs };
      },
    };
    let handOuts = 0;
    let turns = 0;
    // The 5th hand-out's turn ends 60 ms late (a major GC right after it); the others at once.
    const timed = stallingClock(clock, () => (++turns === 5 ? 60 : 0));
    const throttler = new PacedThrottler(
      { targetRps: 2, minPrefetchAmount: 1, maxPrefetchAmount: 5, windowMs: 5_000, slotExpiryMs: 29.2, window: { units: 10, periodMs: 1000, guardMs: 10.4 } },
      remote,
      timed,
      "pdf",
    );
    const departures: number[] = [];
    let running = true;
    const loop = (async () => {
      while (running) {
        await throttler.throttle(1);
        handOuts += 1;
        departures.push(handOuts === 5 ? clock.now() + 60 : clock.now());
      }
    })();
    await clock.advance(5_000);
    running = false;
    throttler.close();
    await loop.catch(() => undefined);
    departures.sort((a, b) => a - b);
    for (let i = 0; i + 10 < departures.length; i++) {
      const gap = (departures[i + 10] ?? 0) - (departures[i] ?? 0);
      assert.ok(gap > 1000, `11 departures within ${gap.toFixed(1)} ms: ${departures.map((d) => d.toFixed(0)).join(" ")}`);
    }
    assert.ok(departures.length >= 40, `${departures.length} hand-outs in 5 s`);
  });
});

describe("sharedDispatchWindow", () => {
  it("is one window per throttler and clock: two jobs' clients of a process count each other's departures", () => {
    const clock = new ManualClock(0);
    const a = new PacedThrottler(
      { targetRps: 1, minPrefetchAmount: 1, maxPrefetchAmount: 5, windowMs: 5_000, slotExpiryMs: 29.2, window: { units: 10, periodMs: 1000, guardMs: 10.4 } },
      { acquirePaced: () => new Promise(() => undefined) },
      clock,
      "pdf",
    );
    const b = new PacedThrottler(
      { targetRps: 1, minPrefetchAmount: 1, maxPrefetchAmount: 5, windowMs: 5_000, slotExpiryMs: 29.2, window: { units: 10, periodMs: 1000, guardMs: 10.4 } },
      { acquirePaced: () => new Promise(() => undefined) },
      clock,
      "pdf",
    );
    a.close();
    b.close();
    const shared = sharedDispatchWindow(clock, "pdf", 10, 1010.4);
    assert.equal(sharedDispatchWindow(clock, "pdf", 10, 1010.4), shared, "the same window for the same figures");
    assert.notEqual(sharedDispatchWindow(clock, "other", 10, 1010.4), shared, "another throttler has its own");
    assert.notEqual(sharedDispatchWindow(new ManualClock(0), "pdf", 10, 1010.4), shared, "another process (clock) has its own");
    assert.notEqual(sharedDispatchWindow(clock, "pdf", 12, 1010.4), shared, "a new limit replaces it");
  });
});

describe("DispatchWindow below one unit per window (limit 0.5/s)", () => {
  it("admits a unit into an empty window, and says when the window is empty again", () => {
    const window = new DispatchWindow(0.5, 1010);
    assert.equal(window.admits(1, 0), true, "an empty window admits a unit larger than it holds");
    window.record(1, 0);
    assert.equal(window.admits(1, 500), false, "not while the first is inside the window");
    const next = window.whenAdmits(1, 500);
    assert.ok(next > 1010 && next < 1011, `admitted again once the first left the window, not at ${next}`);
    assert.equal(window.admits(1, next), true);
  });
});
