import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClassScheduler } from "../src/index.ts";

/** Serves `rounds` chunks of `chunk` units from always-backlogged classes; returns units per class. */
function serve(scheduler: ClassScheduler, rounds: number, chunk = 1): Map<string, number> {
  const served = new Map<string, number>();
  for (let i = 0; i < rounds; i++) {
    const id = scheduler.select();
    assert.ok(id !== null);
    scheduler.charge(id, chunk);
    served.set(id, (served.get(id) ?? 0) + chunk);
  }
  return served;
}

describe("ClassScheduler", () => {
  it("always has a default class with weight 1", () => {
    const scheduler = new ClassScheduler({ a: 2 });
    assert.equal(scheduler.weightOf("default"), 1);
    assert.equal(scheduler.select(), null);
  });

  it("shares among backlogged classes in proportion to weight", () => {
    const scheduler = new ClassScheduler({ a: 5, b: 3, c: 1 });
    for (const id of ["a", "b", "c"]) scheduler.activate(id, 0);
    const served = serve(scheduler, 9000);
    assert.equal(served.get("a"), 5000);
    assert.equal(served.get("b"), 3000);
    assert.equal(served.get("c"), 1000);
  });

  it("breaks ties of virtual time by head timestamp, then class id", () => {
    const scheduler = new ClassScheduler({ a: 1, b: 1 });
    scheduler.activate("a", 500);
    scheduler.activate("b", 100);
    assert.equal(scheduler.select(), "b");
    const byId = new ClassScheduler({ x: 1, y: 1 });
    byId.activate("y", 7);
    byId.activate("x", 7);
    assert.equal(byId.select(), "x");
  });

  it("serves a waking class before the next chunk of a long backlog (start-tag system time)", () => {
    const scheduler = new ClassScheduler({ backlog: 1, waker: 1 });
    scheduler.activate("backlog", 0);
    assert.equal(scheduler.select(), "backlog");
    scheduler.charge("backlog", 10);
    scheduler.activate("waker", 0);
    assert.equal(scheduler.select(), "waker");
  });

  it("gives a waking class no credit for its idle time", () => {
    const scheduler = new ClassScheduler({ busy: 1, idle: 1 });
    scheduler.activate("busy", 0);
    serve(scheduler, 1000);
    scheduler.activate("idle", 0);
    const served = serve(scheduler, 100);
    assert.ok(Math.abs((served.get("idle") ?? 0) - 50) <= 1, `idle got ${served.get("idle")} of 100`);
  });

  it("resets all virtual times when no class is active", () => {
    const scheduler = new ClassScheduler({ a: 1 });
    scheduler.activate("a", 0);
    scheduler.charge("a", 100);
    scheduler.deactivate("a");
    assert.equal(scheduler.views().find((v) => v.id === "a")?.virtualTime, 0);
    assert.equal(scheduler.systemTime, 0);
  });

  it("renormalises huge virtual times without changing the order", () => {
    /** The classes served, in order, by a scheduler whose chunks all have the same size. */
    const order = (chunk: number, rounds: number) => {
      // weights and chunks are powers of 2, so every virtual time is exact in both runs
      const scheduler = new ClassScheduler({ a: 0.25, b: 1, c: 2 });
      for (const id of ["a", "b", "c"]) scheduler.activate(id, 0);
      const picks: string[] = [];
      let renormalised = false;
      for (let i = 0; i < rounds; i++) {
        const before = scheduler.systemTime;
        const id = scheduler.select();
        assert.ok(id !== null);
        // the system time only moves forward, unless it was shifted back toward 0
        if (scheduler.systemTime < before) renormalised = true;
        scheduler.charge(id, chunk);
        picks.push(id);
      }
      return { picks, renormalised, scheduler };
    };
    // Chunks of 2^34 push virtual times past the 1e12 threshold within a few hundred rounds; chunks of
    // 1 never get near it. Only the scale differs, so the order of service must be the same.
    const huge = order(2 ** 34, 600);
    const small = order(1, 600);
    assert.equal(huge.renormalised, true, "the huge run crossed the renormalisation threshold");
    assert.equal(small.renormalised, false);
    assert.deepEqual(huge.picks, small.picks);
    assert.ok(huge.scheduler.systemTime < 1e12);
    for (const view of huge.scheduler.views()) assert.ok(Number.isFinite(view.virtualTime));
  });

  it("retires a dropped class only after it drained", () => {
    const scheduler = new ClassScheduler({ old: 1 });
    scheduler.activate("old", 0);
    scheduler.reconfigure({});
    assert.equal(scheduler.isAccepting("old"), false);
    assert.equal(scheduler.removeIfRetired("old"), false, "still active");
    scheduler.deactivate("old");
    assert.equal(scheduler.removeIfRetired("old"), true);
    assert.equal(scheduler.has("old"), false);
    assert.equal(scheduler.removeIfRetired("default"), false);
  });

  it("applies a new weight to later charges", () => {
    const scheduler = new ClassScheduler({ a: 1, b: 1 });
    scheduler.activate("a", 0);
    scheduler.activate("b", 0);
    serve(scheduler, 100);
    scheduler.reconfigure({ a: 3, b: 1 });
    const served = serve(scheduler, 400);
    assert.ok(Math.abs((served.get("a") ?? 0) - 300) <= 2, `a got ${served.get("a")} of 400`);
  });
});
