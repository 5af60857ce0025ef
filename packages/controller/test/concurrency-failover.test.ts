// Concurrency leases across a failover (docs/design.md §11.2, §5.2), in virtual time with the in-memory
// stand-ins: the leader persists its leases with the balances before it answers a grant, and a
// successor starts with those units in use (not all free), answers a replayed request id from the
// restored lease, and gets back the units of a holder that never renews within lease_timeout.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { dynamicSpecSchema } from "@sluice/spec";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const SPEC = dynamicSpecSchema.parse({ throttlers: { tasks: { kind: "concurrency", limit: 4, lease_timeout: "3s" } } });

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const settle = () => new Promise((resolve) => setImmediate(resolve));

async function member(store: MemoryStore, clock: ManualClock, address: string) {
  const started = await startStandInMember({ store, clock, address, dynamicSpec: SPEC });
  const ask = (clientId: string, amount: number, requestId: string) =>
    started.controller.requestQuota({ throttlerId: "tasks", clientId, amount, timestampMs: 0, quotaClassId: "", requestId }, context());
  return { ...started, ask, tasks: () => started.throttler("tasks") };
}

describe("concurrency leases across a controller failover (virtual time)", () => {
  it("a successor starts with the predecessor's units in use, answers replays from them, and frees a silent holder's after lease_timeout", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const store = new MemoryStore();
    const first = await member(store, clock, "127.0.0.1:7001");
    await first.lead(1);
    await first.ask("a", 2, "a-1");
    await first.ask("b", 1, "b-1");
    const persisted = store.throttler("tasks")?.leases;
    assert.deepEqual(persisted?.holders, { a: { default: 2 }, b: { default: 1 } }, "persisted before the grant was answered");
    assert.deepEqual(
      persisted?.requestIds.map((r) => r.requestId),
      ["a-1", "b-1"],
    );

    // The leader dies (its lease ends without a word); another member takes over from the store.
    const second = await member(store, clock, "127.0.0.1:7002");
    await clock.advance(1_000);
    await second.lead(2);
    assert.equal(second.tasks().inUse, 3, "not a free throttler: a and b still hold their units");
    assert.equal(second.tasks().concurrency?.holders, 2);
    assert.ok(
      second.lines.some((l) => l.includes("units still held by their holders: tasks=3")),
      second.lines.join("\n"),
    );

    // a's answer was lost in the failover: its retry reaches the successor and is not leased again.
    assert.equal((await second.ask("a", 2, "a-1")).granted, 2);
    assert.equal(second.tasks().inUse, 3);
    // d takes the one free unit; a request for two waits.
    await second.ask("d", 1, "d-1");
    let granted = false;
    const waiting = second.ask("c", 2, "c-1").then(() => (granted = true));
    await settle();
    assert.equal(granted, false);
    // a renews with the successor, b never does (it crashed with the old leader).
    for (let i = 0; i < 8; i++) {
      await clock.advance(500);
      await second.controller.renewLeases({ clientId: "a", throttlerIds: ["tasks"] }, context());
      await second.controller.renewLeases({ clientId: "d", throttlerIds: ["tasks"] }, context());
    }
    assert.equal(granted, false, "b's unit came back, but one free unit is not two");
    await second.controller.releaseQuota({ throttlerId: "tasks", clientId: "d", amount: 1, quotaClassId: "" }, context());
    await waiting;
    assert.equal(second.tasks().inUse, 4, "a's 2 and c's 2");
    assert.equal(second.tasks().concurrency?.expiredLeases, 1);
    assert.equal(second.tasks().concurrency?.expiredUnits, 1);
    await second.controller.close();
    await first.controller.close();
  });
});
