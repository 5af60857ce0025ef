import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { AlignedPartition, type AlignmentAnswer } from "@sluice/runtime";

const MIN = 60_000;
const T0 = 1_700_000_000_000;
const settings = { groupName: "g", driftBoundMs: 10 * MIN, idleTimeoutMs: 5_000 };

function answer(othersWatermarkMs: number | "unbounded", controllerInstance = "a", settling = false): AlignmentAnswer {
  return {
    bound: {
      partitionId: "C/in/0",
      othersWatermarkMs: othersWatermarkMs === "unbounded" ? 0 : othersWatermarkMs,
      unbounded: othersWatermarkMs === "unbounded",
    },
    controllerInstance,
    settling,
  };
}

function partition(clock = new ManualClock(T0), reports: string[] = []) {
  return new AlignedPartition("C/in/0", "C", settings, clock, () => reports.push("soon"));
}

describe("AlignedPartition (the job's gate, virtual time)", () => {
  it("a partition that has read nothing is never held; once it has, it waits for a first answer, then reads within drift_bound", () => {
    const reports: string[] = [];
    const p = partition(new ManualClock(T0), reports);
    assert.equal(p.mayRead(), true);
    p.noteRead([T0 + 5 * MIN, T0 + 2 * MIN]);
    assert.equal(p.watermarkMs, T0 + 5 * MIN, "the largest event time read, not the last");
    assert.ok(reports.length >= 1, "a first watermark is reported soon");
    assert.equal(p.mayRead(), false, "no answer yet");
    p.applyAnswer(answer(T0 - 5 * MIN));
    assert.equal(p.mayRead(), true, "exactly drift_bound ahead is allowed");
    p.applyAnswer(answer(T0 - 5 * MIN - 1));
    assert.equal(p.mayRead(), false);
    p.applyAnswer(answer("unbounded"));
    assert.equal(p.mayRead(), true);
  });

  it("holds through the source while waiting and lets go when an answer allows it; an abort ends the wait without unpausing", async () => {
    const p = partition();
    p.noteRead([T0 + 60 * MIN]);
    p.applyAnswer(answer(T0));
    const holds: boolean[] = [];
    const wait = p.whenReadable(new AbortController().signal, (held) => holds.push(held));
    assert.equal(p.held, true);
    assert.deepEqual(holds, [true]);
    p.applyAnswer(answer(T0 + 30 * MIN));
    assert.equal(p.held, true, "still 30 min ahead");
    p.applyAnswer(answer(T0 + 50 * MIN));
    await wait;
    assert.equal(p.held, false);
    assert.deepEqual(holds, [true, false]);

    const stop = new AbortController();
    p.applyAnswer(answer(T0));
    const aborted = p.whenReadable(stop.signal, (held) => holds.push(held));
    stop.abort();
    await aborted;
    assert.deepEqual(holds, [true, false, true], "revoked: the next owner's source state is not touched");
  });

  it("a hold from an earlier controller lasts while a restarted one is settling, and no longer", async () => {
    const p = partition();
    p.noteRead([T0 + 60 * MIN]);
    p.applyAnswer(answer(T0, "old"));
    const wait = p.whenReadable(new AbortController().signal, () => {});
    p.applyAnswer(answer("unbounded", "new", true));
    assert.equal(p.held, true, "the new controller may not have heard from every worker yet");
    p.applyAnswer(answer("unbounded", "new", false));
    await wait;
    assert.equal(p.held, false);
  });

  it("idle only when not held, not busy and nothing delivered for idle_timeout; records without event times never hold the group", async () => {
    const clock = new ManualClock(T0);
    const p = partition(clock);
    p.begin();
    await clock.advance(10_000);
    assert.equal(p.isIdle(clock.now()), false, "a batch is being handled");
    p.end();
    await clock.advance(4_999);
    assert.equal(p.isIdle(clock.now()), false);
    await clock.advance(1);
    assert.equal(p.report(clock.now()).idle, true);

    const untimed = partition(clock);
    untimed.noteRead([0, Number.NaN]);
    assert.equal(untimed.isIdle(clock.now()), true, "cannot be aligned, so it does not hold the others");
    assert.equal(untimed.mayRead(), true);
  });

  it("release() ends every wait for good (alignment turned off, partition revoked)", async () => {
    const p = partition();
    p.noteRead([T0 + 60 * MIN]);
    p.applyAnswer(answer(T0));
    const wait = p.whenReadable(new AbortController().signal, () => {});
    p.release();
    await wait;
    assert.equal(p.mayRead(), true);
  });
});
