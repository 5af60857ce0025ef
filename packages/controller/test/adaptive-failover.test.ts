// An adaptive limit across a controller failover (docs/design.md §11.3, §5.2), in virtual time with the
// in-memory stand-ins: the leader persists its adaptive loop's state after every decision (even
// with no grant to persist), and a successor goes on from that limit, failure count and slow-start
// phase instead of starting over at initial_limit — and from the whole memory of the law, so its
// next decision is the one the old leader would have made (a capacity-loss cut is held, not cut
// again; the run is in adaptive-loss-run.ts, and packages/kafka/test runs it through the record's JSON).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import type { LoadReading } from "../src/index.ts";
import { LOSS_DECISIONS, LOSS_READINGS, lossRun } from "./adaptive-loss-run.ts";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const adaptive = {
  load: { module: "./load.ts" },
  target: { low: 0.9, high: 0.95 },
  initial_limit: 2,
  min_limit: 1,
  max_limit: 100,
  interval: "1s",
};
const parsed = validateDynamicSpec({ throttlers: { tasks: { kind: "concurrency", lease_timeout: "30s", adaptive } } });
assert.ok(parsed.ok);
const SPEC = parsed.value;

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

async function member(store: MemoryStore, clock: ManualClock, address: string, load: { reading: LoadReading }) {
  const started = await startStandInMember({
    store,
    clock,
    address,
    dynamicSpec: SPEC,
    loadSourceOf: () => ({ description: "the test", read: async () => load.reading }),
  });
  return { ...started, tasks: () => started.throttler("tasks") };
}

describe("adaptive limit across a controller failover (virtual time)", () => {
  it("a successor goes on from the limit, failures and phase the leader persisted, not from initial_limit", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const store = new MemoryStore();
    const load = { reading: { ok: true, load: 0.3 } as LoadReading };
    const first = await member(store, clock, "127.0.0.1:7001", load);
    await first.lead(1);
    // A request for more than the limit waits: demand, so slow start raises every interval.
    void first.controller
      .requestQuota({ throttlerId: "tasks", clientId: "w", amount: 60, timestampMs: 0, quotaClassId: "", requestId: "w-1" }, context())
      .catch(() => {});
    for (let i = 0; i < 4; i++) {
      await clock.advance(1_000);
      await settle();
    }
    const reached = first.tasks().limit;
    assert.ok(reached !== null && reached > 10, `slow start raised the limit: ${reached}`);
    // Two failed readings: the third, on whichever controller, falls back to min_limit.
    load.reading = { ok: false, reason: "Prometheus did not answer" };
    for (let i = 0; i < 2; i++) {
      await clock.advance(1_000);
      await settle();
    }
    const persisted = store.throttler("tasks")?.adaptive;
    assert.equal(persisted?.limitInForce, reached, "persisted after the decisions, with no grant to persist");
    assert.equal(persisted?.law.failures, 2);

    // The leader dies; another member takes over from the store.
    await first.controller.close();
    const second = await member(store, clock, "127.0.0.1:7002", load);
    await second.lead(2);
    assert.equal(second.tasks().limit, reached, "goes on from the predecessor's limit");
    assert.equal(second.tasks().adaptive?.consecutiveFailures, 2);
    assert.ok(
      second.lines.some((l) => l.includes(`adaptive limits going on from: tasks=${reached}`)),
      second.lines.join("\n"),
    );
    // The third failure in a row (the first on this leader) falls back, as it would have on the first.
    await clock.advance(1_000);
    await settle();
    assert.equal(second.tasks().limit, 1, second.lines.join("\n"));
    await second.controller.close();
  });

  it("after a capacity-loss cut, a successor decides as the old leader would have: failover after every reading matches an unbroken run", async () => {
    const unbroken = await lossRun({ failoverAfter: null });
    // The premise: the run cuts once for the loss and then holds (what the law's memory is for).
    assert.deepEqual(
      unbroken.steps.map((s) => `${s.action} ${s.limit}`),
      LOSS_DECISIONS,
      unbroken.steps.map((s) => s.reason).join("\n"),
    );
    assert.match(unbroken.steps[1]?.reason ?? "", /the system lost capacity/);
    assert.match(unbroken.steps[2]?.reason ?? "", /cannot show the last cut yet/);
    assert.match(unbroken.steps[3]?.reason ?? "", /falling from 1: the last cut is still coming through/);
    for (let k = 1; k < LOSS_READINGS.length; k++) {
      const broken = await lossRun({ failoverAfter: k });
      assert.deepEqual(broken.steps, unbroken.steps, `failover after reading ${k}:\n${broken.lines.join("\n")}`);
      assert.ok(
        broken.lines.some((l) => l.includes(`adaptive limits going on from: tasks=${unbroken.steps[k - 1]?.limit}`)),
        broken.lines.join("\n"),
      );
    }
  });

  it("without the law's memory of a loss cut (what a record that lacks it gives) the successor cuts again: what persisting it prevents", async () => {
    // steadyLast: the saturated reading after a steady one is not seen as a loss (×0.6, not ×0.5).
    assert.deepEqual((await lossRun({ failoverAfter: 1, forget: ["steadyLast"] })).steps[1], {
      action: "cut",
      limit: 12,
      reason: "load 1 above [0.9, 0.95], use 20",
    });
    // sinceLossCut: the reading that cannot show the cut yet cuts again (×0.8).
    assert.deepEqual((await lossRun({ failoverAfter: 2, forget: ["sinceLossCut"] })).steps[2]?.action, "cut");
    // lastLoad: the falling reading is taken for a new overload and cut in proportion.
    assert.deepEqual((await lossRun({ failoverAfter: 3, forget: ["lastLoad"] })).steps[3]?.action, "cut");
  });
});
