import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Clock, ManualClock, PacedThrottler, type PacedConfig, type PacedQuotaRemote, type PaceSchedule } from "../src/index.ts";
import { SharedWakeups } from "../src/shared-wakeups.ts";

/**
 * A clock that counts the timers that fired on it — the wake-ups, what costs; a timer replaced by a
 * sooner one is cleared before it fires — (the remote below sleeps on the inner clock, uncounted).
 */
function countingClock(clock: ManualClock): Clock & { readonly sleeps: number } {
  let sleeps = 0;
  return {
    now: () => clock.now(),
    sleep: (ms, signal) => clock.sleep(ms, signal),
    setTimer: (ms, fire) =>
      clock.setTimer(ms, () => {
        sleeps += 1;
        fire();
      }),
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

  it("a sooner request re-arms the one timer sooner; whoever is not due then is woken later", async () => {
    const clock = new ManualClock(0);
    const wakeups = SharedWakeups.of(clock);
    const woke: string[] = [];
    const late = {};
    const soon = {};
    wakeups.schedule(late, 50, 50, () => woke.push(`late@${clock.now()}`));
    wakeups.schedule(soon, 10, 10, () => woke.push(`soon@${clock.now()}`));
    assert.equal(wakeups.timersArmed, 1, "the timer for 50 was cleared, one for 10 armed");
    assert.equal(clock.pendingTimers, 1);
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
    assert.ok(perUnit(four) <= perUnit(one) * 1.5, `4 clients armed ${four.sleeps} timers for ${four.units} units, 1 client ${one.sleeps} for ${one.units}`);
  });
});

/** A clock with `sleep` alone (as a test's wrapper is), its timers `lateMs` late. */
function sleepOnlyClock(clock: ManualClock, lateMs = 0): Clock {
  return { now: () => clock.now(), sleep: (ms, signal) => clock.sleep(ms + lateMs, signal) };
}

describe("SharedWakeups on a clock with sleep alone, and the lateness it remembers", () => {
  it("wakes within the same spans, and a replaced or cancelled timer never fires", async () => {
    const clock = new ManualClock(0);
    const wakeups = SharedWakeups.of(sleepOnlyClock(clock));
    const woke: string[] = [];
    const [late, soon, gone] = [{}, {}, {}];
    wakeups.schedule(late, 50, 50, () => woke.push(`late@${clock.now()}`));
    wakeups.schedule(soon, 10, 10, () => woke.push(`soon@${clock.now()}`));
    assert.equal(clock.pendingTimers, 1, "the sleep for 50 was aborted when the one for 10 replaced it");
    await clock.advance(100);
    assert.deepEqual(woke, ["soon@10", "late@50"]);
    wakeups.schedule(gone, 200, 300, () => woke.push("gone"));
    wakeups.cancel(gone);
    assert.equal(clock.pendingTimers, 0);
    await clock.advance(1_000);
    assert.equal(woke.length, 2);
  });

  it("reports the second worst lateness of its last 32 wake-ups: one stall is forgotten, two are not", async () => {
    const clock = new ManualClock(0);
    let lateMs = 3;
    const late: Clock = { now: () => clock.now(), sleep: (ms, signal) => clock.sleep(ms + lateMs, signal) };
    const wakeups = SharedWakeups.of(late);
    assert.equal(wakeups.recentLatenessMs, 0, "nothing known before the first wake-up");
    const owner = {};
    const wakeOnce = async () => {
      const at = clock.now() + 5;
      wakeups.schedule(owner, at, at, () => undefined);
      await clock.advance(40);
    };
    for (let i = 0; i < 5; i++) await wakeOnce();
    assert.equal(wakeups.recentLatenessMs, 3);
    lateMs = 30;
    await wakeOnce();
    lateMs = 3;
    await wakeOnce();
    assert.equal(wakeups.recentLatenessMs, 3, "one stall of 30 ms among the last 32: the second worst is 3");
    lateMs = 20;
    await wakeOnce();
    assert.equal(wakeups.recentLatenessMs, 20, "two stalls: 20 ms is kept room for");
    lateMs = 3;
    for (let i = 0; i < 32; i++) await wakeOnce();
    assert.equal(wakeups.recentLatenessMs, 3, "32 wake-ups later both stalls are forgotten");
  });

  it("a backlogged client wakes up to 2/3 of the expiry apart while timers are on time, and loses no slot when they run 15 ms late", async () => {
    const config: PacedConfig = { targetRps: 2, minPrefetchAmount: 1, maxPrefetchAmount: 500, windowMs: 10_000, slotExpiryMs: 37.5 };
    const run = async (lateMs: number) => {
      const clock = new ManualClock(1_000_000);
      let wakeups = 0;
      const inner = lateMs === 0 ? clock : sleepOnlyClock(clock, lateMs);
      const counting: Clock = {
        now: () => clock.now(),
        sleep: (ms, signal) => inner.sleep(ms, signal).then(() => void (wakeups += 1)),
      };
      const throttler = new PacedThrottler(config, timeline(clock, 1), counting, "paced");
      let units = 0;
      let stop = false;
      const loop = (async () => {
        while (!stop) {
          await throttler.throttle(1).catch(() => (stop = true));
          units += 1;
        }
      })();
      await clock.advance(1_000);
      const before = { units, wakeups, expired: throttler.stats().expired };
      await clock.advance(3_000);
      const after = { units, wakeups, expired: throttler.stats().expired };
      stop = true;
      throttler.close();
      await clock.advance(10);
      await loop;
      return {
        unitsPerWakeup: (after.units - before.units) / (after.wakeups - before.wakeups),
        expired: after.expired - before.expired,
        units: after.units - before.units,
      };
    };
    const onTime = await run(0);
    // 1 ms slots: 25 ms apart is about 25 units per wake-up (1/3 of the expiry would be about 12).
    assert.ok(onTime.unitsPerWakeup >= 20, `on time: ${onTime.unitsPerWakeup.toFixed(1)} units per wake-up`);
    assert.equal(onTime.expired, 0);
    const late = await run(15);
    // Kept for lateness: 2 ms + 2 × 15 ms, so wake-ups are planned 12.5 ms apart and land 27.5 ms apart,
    // within the 37.5 ms expiry; at 2/3 of it (25 ms + 15 ms late) slots would expire at every wake-up.
    assert.equal(late.expired, 0, `15 ms late: ${late.expired} slots expired of ${late.units}`);
    assert.ok(late.units >= 2_900, `15 ms late: ${late.units} units in 3 s`);
  });
});
