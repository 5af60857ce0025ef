import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import { MAX_TIMER_DELAY_MS, systemClock } from "../src/clock.ts";

/** Captures setTimeout calls instead of scheduling them, so a test can fire them by hand. */
function captureTimers() {
  const armed: { fire: () => void; delayMs: number; cleared: boolean }[] = [];
  const set = mock.method(globalThis, "setTimeout", (fire: () => void, delayMs: number) => {
    const timer = { fire, delayMs, cleared: false };
    armed.push(timer);
    return timer;
  });
  const clear = mock.method(globalThis, "clearTimeout", (timer: { cleared: boolean } | undefined) => {
    if (timer) timer.cleared = true;
  });
  return {
    armed,
    restore() {
      set.mock.restore();
      clear.mock.restore();
    },
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

describe("systemClock.sleep", () => {
  it("never hands setTimeout more than 2^31 − 1 ms: a 60-day sleep is re-armed, then resolves", async () => {
    const timers = captureTimers();
    try {
      let resolved = false;
      const sleeping = systemClock.sleep(60 * DAY_MS).then(() => (resolved = true));
      for (let i = 0; i < 2; i++) {
        const timer = timers.armed[i];
        assert.ok(timer, `timer ${i} armed`);
        assert.equal(timer.delayMs, MAX_TIMER_DELAY_MS);
        timer.fire();
        await Promise.resolve();
        assert.equal(resolved, false, `not resolved after ${i + 1} step(s)`);
      }
      const last = timers.armed[2];
      assert.equal(last?.delayMs, 60 * DAY_MS - 2 * MAX_TIMER_DELAY_MS, "the rest of the wait");
      last?.fire();
      await sleeping;
      assert.equal(resolved, true);
      assert.equal(timers.armed.length, 3);
    } finally {
      timers.restore();
    }
  });

  it("an abort during a long sleep clears the timer armed at that moment", async () => {
    const timers = captureTimers();
    try {
      const controller = new AbortController();
      const sleeping = systemClock.sleep(Number.POSITIVE_INFINITY, controller.signal);
      timers.armed[0]?.fire();
      assert.equal(timers.armed.length, 2, "re-armed, not fired after 1 ms");
      assert.ok((timers.armed[1]?.delayMs ?? 0) <= MAX_TIMER_DELAY_MS);
      controller.abort(new Error("stop"));
      await assert.rejects(sleeping, /stop/);
      assert.equal(timers.armed[1]?.cleared, true);
    } finally {
      timers.restore();
    }
  });

  it("short sleeps are one timer, as before; NaN and negative delays are 0", async () => {
    const timers = captureTimers();
    try {
      void systemClock.sleep(25);
      void systemClock.sleep(Number.NaN);
      void systemClock.sleep(-5);
      assert.deepEqual(
        timers.armed.map((t) => t.delayMs),
        [25, 0, 0],
      );
      for (const timer of timers.armed) timer.fire();
    } finally {
      timers.restore();
    }
  });

  it("really sleeps on the event loop", async () => {
    const started = performance.now();
    await systemClock.sleep(5);
    assert.ok(performance.now() - started >= 4, "slept at least about 5 ms");
  });
});
