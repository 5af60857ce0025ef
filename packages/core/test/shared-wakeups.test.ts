import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Clock, ManualClock, PacedThrottler, type PacedConfig, type PacedQuotaRemote, type PaceSchedule } from "../src/index.ts";
import { SharedWakeups } from "../src/shared-wakeups.ts";

/** A clock that counts the timers armed on it (the remote below sleeps on the inner clock, uncounted). */
function countingClock(clock: ManualClock): Clock & { readonly sleeps: number } {
  let sleeps = 0;
  return {
    now: () => clock.now(),
    sleep: (ms, signal) => {
      sleeps += 1;
      return clock.sleep(ms, signal);
    },
    get sleeps() {
      return sleeps;
    },
  };
}

/** One controller timeline shared by every client: slots `intervalMs` apart, answered after 1 ms. */
function timeline(clock: ManualClock, intervalMs: number): PacedQuotaRemote {
  let cursorAt = 0;
  return {
    async acquirePaced(amount, signal): Promise<PaceSchedule> {
      await clock.sleep(1, signal);
      const startAt = Math.max(clock.now(), cursorAt);
      cursorAt = startAt + amount * intervalMs;
      return { startDelayMs: startAt - clock.now(), intervalMs };
    },
  };
}

describe("SharedWakeups: one timer for every paced client on a clock", () => {
  it("arms one timer for N owners and wakes each within its span, never before its earliest", async () => {
    const clock = new ManualClock(1_000);
    const wakeups = SharedWakeups.of(clock);
    assert.equal(SharedWakeups.of(clock), wakeups, "one per clock");
    const spans = [
      { earliest: 1_010, latest: 1_020 },
      { earliest: 1_005, latest: 1_030 },
      { earliest: 1_015, latest: 1_040 },
      { earliest: 1_025, latest: 1_045 },
      { earliest: 1_060, latest: 1_060 },
    ];
    const wokeAt: number[] = spans.map(() => Number.NaN);
    spans.forEach((span, i) => wakeups.schedule(span, span.earliest, span.latest, () => (wokeAt[i] = clock.now())));
    assert.equal(wakeups.timersArmed, 1, "the soonest `latest` came first: one timer serves them all");
    assert.equal(clock.pendingTimers, 1);
    await clock.advance(100);
    spans.forEach((span, i) => {
      const at = wokeAt[i] ?? Number.NaN;
      assert.ok(at >= span.earliest && at <= span.latest, `owner ${i} woke at ${at}, asked for [${span.earliest}, ${span.latest}]`);
    });
    // The first three were due by the soonest `latest` (1,020) and shared its wake-up.
    assert.deepEqual(wokeAt, [1_020, 1_020, 1_020, 1_045, 1_060]);
    assert.equal(wakeups.timersArmed, 0);
    assert.equal(wakeups.waiting, 0);
  });

  it("a sooner request arms a sooner timer; the overtaken one wakes whoever is due by then", async () => {
    const clock = new ManualClock(0);
    const wakeups = SharedWakeups.of(clock);
    const woke: string[] = [];
    const late = {};
    const soon = {};
    wakeups.schedule(late, 50, 50, () => woke.push(`late@${clock.now()}`));
    wakeups.schedule(soon, 10, 10, () => woke.push(`soon@${clock.now()}`));
    assert.equal(wakeups.timersArmed, 2);
    await clock.advance(100);
    assert.deepEqual(woke, ["soon@10", "late@50"]);
  });

  it("the last owner to cancel clears the timers, so that nothing holds a process open", async () => {
    const clock = new ManualClock(0);
    const wakeups = SharedWakeups.of(clock);
    const a = {};
    const b = {};
    let woken = 0;
    wakeups.schedule(a, 100, 200, () => (woken += 1));
    wakeups.schedule(b, 300, 400, () => (woken += 1));
    wakeups.cancel(a);
    assert.equal(clock.pendingTimers, 1, "b still waits");
    wakeups.cancel(b);
    assert.equal(clock.pendingTimers, 0, "nobody waits: no timer left behind");
    await clock.advance(1_000);
    assert.equal(woken, 0);
  });

  it("four backlogged paced clients in one process wake about as often as one", async () => {
    const config: PacedConfig = { targetRps: 2, minPrefetchAmount: 1, maxPrefetchAmount: 500, windowMs: 10_000, slotExpiryMs: 37.5 };
    // Each run gets its own clock (and so its own shared wake-ups); 1,000 slots/s on one timeline.
    const run = async (clients: number) => {
      const clock = new ManualClock(1_000_000);
      const counting = countingClock(clock);
      const remote = timeline(clock, 1);
      const throttlers = Array.from({ length: clients }, () => new PacedThrottler(config, remote, counting, "paced"));
      let units = 0;
      let stop = false;
      const loops = throttlers.map(async (throttler) => {
        while (!stop) {
          await throttler.throttle(1).catch(() => (stop = true));
          units += 1;
        }
      });
      await clock.advance(2_000);
      stop = true;
      for (const throttler of throttlers) throttler.close();
      await clock.advance(10);
      await Promise.all(loops);
      assert.equal(clock.pendingTimers, 0, `${clients} closed clients leave no timer behind`);
      return { sleeps: counting.sleeps, units };
    };
    const one = await run(1);
    const four = await run(4);
    assert.ok(one.units > 1_500 && four.units > 1_500, `both kept the timeline busy (${one.units}, ${four.units} units in 2 s)`);
    // Without sharing, four clients arm about four times the timers of one (each its own, a third of
    // the expiry apart); shared, the timers armed per unit stay within a small margin of one client's.
    const perUnit = (r: { sleeps: number; units: number }) => r.sleeps / r.units;
    assert.ok(
      perUnit(four) <= perUnit(one) * 1.5,
      `4 clients armed ${four.sleeps} timers for ${four.units} units, 1 client ${one.sleeps} for ${one.units}`,
    );
  });
});
