// services: kafka
// A keyed throttler's per-key records on a real broker (docs/design.md §9.1, §9.2): one record per key
// in debt (`bucket/<throttler id>/<key>`), a tombstone for a key full again, and a successor's store
// reads back exactly the keys still in debt beside the throttlers' own records.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { PersistedThrottler } from "@sluice/failover-ports";
import { KafkaControllerStateStore } from "@sluice/kafka";
import { kafka, uniqueName } from "../support/kafka.ts";

const stores: KafkaControllerStateStore[] = [];
after(async () => {
  await Promise.all(stores.map((s) => s.close()));
});

async function store(pipeline: string): Promise<KafkaControllerStateStore> {
  const s = new KafkaControllerStateStore({ kafka: await kafka(), pipeline });
  stores.push(s);
  await s.start();
  return s;
}

const keyRecord = (key: string, balance: number, generation: number): PersistedThrottler => ({
  throttlerId: "per_customer",
  key,
  balance: { balance, atMs: 1_000 },
  limitPerSecond: 1,
  generation,
  writtenAtMs: 1_000,
});

describe("controller state on Kafka: per-key records of a keyed throttler", () => {
  it("a successor reads every key in debt, not the key whose record was deleted, beside the throttler's own record", async () => {
    const pipeline = uniqueName("state-keys");
    const leader = await store(pipeline);
    await leader.claimWriter();
    const own: PersistedThrottler = { throttlerId: "per_customer", balance: { balance: 1, atMs: 1_000 }, limitPerSecond: 1, generation: 1, writtenAtMs: 1_000 };
    await leader.write({ throttlers: [own, keyRecord("acme", -29, 1), keyRecord("globex", -2, 1), keyRecord("a/b", -5, 1)] });
    await leader.write({ throttlers: [keyRecord("acme", -30, 1)], removedKeys: [{ throttlerId: "per_customer", key: "globex" }] });

    // The leader dies; a successor claims the writer (fencing it) and reads the state to its end.
    const successor = await store(pipeline);
    await successor.claimWriter();
    const state = await successor.catchUp();
    assert.equal(state.throttlers.get("per_customer")?.balance?.balance, 1, "the throttler's own record is not one of its keys");
    const keys = state.keys.get("per_customer");
    assert.ok(keys, "the keyed throttler's keys are read");
    assert.deepEqual(
      Object.fromEntries([...keys].map(([key, record]) => [key, record.balance?.balance])),
      { acme: -30, "a/b": -5 },
      "the latest record of each key in debt; globex's tombstone deleted it",
    );
    assert.equal(keys.get("acme")?.limitPerSecond, 1);
  });
});
