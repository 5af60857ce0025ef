// The nemesis's schedule: a seed replays exactly, and a schedule of five steps or more hits every
// fault kind. Pure logic, no services.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FAULT_KINDS } from "./history.ts";
import { faultSchedule, SESSION_TIMEOUT_MS } from "./schedule.ts";

describe("fault schedule", () => {
  it("the same seed and minutes give the same schedule; another seed another one", () => {
    assert.deepEqual(faultSchedule({ seed: 42, minutes: 10 }), faultSchedule({ seed: 42, minutes: 10 }));
    assert.notDeepEqual(faultSchedule({ seed: 42, minutes: 10 }), faultSchedule({ seed: 43, minutes: 10 }));
  });

  it("every seed's 10-minute and 3-minute schedules hit every fault kind; pauses and cuts outlast the session timeout", () => {
    for (let seed = 0; seed < 200; seed++) {
      for (const minutes of [3, 10]) {
        const steps = faultSchedule({ seed, minutes });
        for (const kind of FAULT_KINDS)
          assert.ok(
            steps.some((s) => s.kind === kind),
            `seed ${seed}, ${minutes} min: no ${kind}`,
          );
        for (const s of steps) {
          assert.ok(s.pauseMs > SESSION_TIMEOUT_MS && s.cutMs > SESSION_TIMEOUT_MS, `seed ${seed}: a pause or cut within the session timeout`);
        }
      }
    }
  });

  it("--minutes lengthens the schedule; --faults keeps only the kinds named", () => {
    assert.ok(faultSchedule({ seed: 1, minutes: 10 }).length > faultSchedule({ seed: 1, minutes: 3 }).length);
    const only = faultSchedule({ seed: 1, minutes: 5, kinds: ["kill-leader", "cut-connection"] });
    assert.ok(only.every((s) => s.kind === "kill-leader" || s.kind === "cut-connection"));
  });
});
