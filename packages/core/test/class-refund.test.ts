import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClassScheduler } from "../src/index.ts";

// Quota a class hands back unused (ReleaseQuota) gives back its virtual time, so a class whose
// clients return prefetched quota is still served by its weight — but it never banks credit.
describe("ClassScheduler.refund", () => {
  it("a class that returned half of what it got is served that much more afterwards", () => {
    const scheduler = new ClassScheduler({ a: 1, b: 1 });
    scheduler.activate("a", 0);
    scheduler.activate("b", 0);
    const served = new Map<string, number>();
    for (let i = 0; i < 200; i++) {
      const id = scheduler.select();
      assert.ok(id !== null);
      scheduler.charge(id, 1);
      served.set(id, (served.get(id) ?? 0) + 1);
      // Every chunk a gets, it later hands half back (a bursty client trimming its pool).
      if (id === "a") scheduler.refund("a", 0.5);
    }
    const a = served.get("a") ?? 0;
    const b = served.get("b") ?? 0;
    // Used: a keeps half of each grant. Equal weights → equal use → a is granted about twice b.
    assert.ok(Math.abs(a * 0.5 - b) <= 2, `a granted ${a} (used ${a * 0.5}), b ${b}`);
  });

  it("never takes a class below the system virtual time", () => {
    const scheduler = new ClassScheduler({ a: 1, b: 1 });
    scheduler.activate("a", 0);
    scheduler.activate("b", 0);
    for (let i = 0; i < 10; i++) {
      const id = scheduler.select();
      assert.ok(id !== null);
      scheduler.charge(id, 1);
    }
    const system = scheduler.systemTime;
    const given = scheduler.refund("a", 1_000);
    const a = scheduler.views().find((v) => v.id === "a");
    assert.ok(a && a.virtualTime >= system - 1e-9, `a at ${a?.virtualTime}, system ${system}`);
    assert.ok(given <= 5 + 1e-9, `gave back ${given}, at most what a was charged beyond the system time`);
    assert.equal(scheduler.refund("nobody", 5), 0);
  });
});
