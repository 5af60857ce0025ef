import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock } from "@sluice/core";
import { StreamCallDeadlines } from "../src/stream-call-deadlines.ts";

describe("StreamCallDeadlines", () => {
  it("expires open calls in deadline order on one timer and skips answered ones", async () => {
    const open = new Map<number, object>();
    const expired: number[] = [];
    const deadlines = new StreamCallDeadlines<object>(
      (id, call) => open.get(id) === call,
      (id) => {
        expired.push(id);
        open.delete(id);
      },
      () => open.size,
    );
    const now = systemClock.now();
    for (const [id, inMs] of [
      [1, 60],
      [2, 20],
      [3, 40],
      [4, 30],
    ] as const) {
      const call = {};
      open.set(id, call);
      deadlines.add(now + inMs, id, call, "RequestQuota");
    }
    open.delete(4); // answered before its deadline
    open.set(3, {}); // id 3 reused by another call: the old deadline is not its
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.deepEqual(expired, [2, 1]);
    deadlines.clear();
  });

  it("rebuilds from the open calls when answered calls' deadlines pile up", () => {
    const open = new Map<number, object>();
    const deadlines = new StreamCallDeadlines<object>(
      (id, call) => open.get(id) === call,
      () => undefined,
      () => open.size,
    );
    const far = systemClock.now() + 60_000;
    for (let id = 1; id <= 20_000; id++) {
      const call = {};
      open.set(id, call);
      deadlines.add(far, id, call, "RequestQuota");
      if (id > 10) open.delete(id - 10); // all but the last 10 are answered soon after
    }
    assert.ok(deadlines.size < 2_000, `${deadlines.size} deadlines kept for ${open.size} open calls`);
    deadlines.clear();
    assert.equal(deadlines.size, 0);
  });
});
