// services: kafka
// A keyed throttler's per-key records on a real broker (docs/design.md §9.1, §9.2): one record per key
// in debt (`bucket/<throttler id>/<key>`), a tombstone for a key full again, and a successor's store
// reads back exactly the keys still in debt beside the throttlers' own records. The throttler id is
// escaped in the Kafka key, so a throttler "a/b" and the key "b" of "a" are two records; a record
// written before the escaping, at its unescaped Kafka key, is read and deleted there once rewritten.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { PersistedThrottler } from "@sluice/failover-ports";
import { KafkaControllerStateStore } from "@sluice/kafka";
import { kafka, uniqueName, withAdmin } from "../support/kafka.ts";

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

async function produceRaw(topic: string, key: string, value: string): Promise<void> {
  const producer = (await kafka()).producer();
  await producer.connect();
  try {
    await producer.send({ topic, messages: [{ key, value }], acks: -1 });
  } finally {
    await producer.disconnect();
  }
}

/** Every record of a topic's partition 0 up to its end, committed ones only, with its key; null values are tombstones. */
async function readRaw(topic: string): Promise<{ key: string; value: string | null }[]> {
  const end = await withAdmin(async (admin) => Number((await admin.fetchTopicOffsets(topic)).find((o) => o.partition === 0)?.high ?? 0));
  const consumer = (await kafka()).consumer({ groupId: uniqueName("raw-reader"), readUncommitted: false });
  const out: { key: string; value: string | null }[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    let done: () => void = () => {};
    const finished = new Promise<void>((resolve) => (done = resolve));
    await consumer.run({
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) out.push({ key: m.key?.toString() ?? "", value: m.value?.toString() ?? null });
        if (Number(batch.lastOffset()) + 1 >= end) done();
      },
    });
    const timer = setTimeout(done, 30_000);
    await finished;
    clearTimeout(timer);
    return out;
  } finally {
    await consumer.disconnect();
  }
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

  it('a throttler "a/b" and the key "b" of a keyed throttler "a" are two records; deleting one leaves the other', async () => {
    const pipeline = uniqueName("state-keys-slash");
    const leader = await store(pipeline);
    await leader.claimWriter();
    const slashed: PersistedThrottler = { throttlerId: "a/b", balance: { balance: -3, atMs: 1_000 }, limitPerSecond: 1, generation: 1, writtenAtMs: 1_000 };
    const key: PersistedThrottler = { throttlerId: "a", key: "b", balance: { balance: -7, atMs: 1_000 }, limitPerSecond: 1, generation: 1, writtenAtMs: 1_000 };
    await leader.write({ throttlers: [slashed, key] });
    await leader.write({ removedKeys: [{ throttlerId: "a", key: "b" }] });

    const successor = await store(pipeline);
    await successor.claimWriter();
    const state = await successor.catchUp();
    assert.equal(state.throttlers.get("a/b")?.balance?.balance, -3, "the throttler's record outlives the tombstone of the other's key");
    assert.equal(state.keys.has("a"), false);
  });

  it("a record written at an unescaped Kafka key (before ids were escaped) is read, and deleted there once a successor rewrites it", async () => {
    const pipeline = uniqueName("state-keys-legacy");
    const leader = await store(pipeline);
    await leader.claimWriter();
    const old: PersistedThrottler = { throttlerId: "x/y", balance: { balance: -4, atMs: 1_000 }, limitPerSecond: 1, generation: 1, writtenAtMs: 1_000 };
    // Written as the controller wrote it before ids were escaped: at "bucket/x/y".
    const value = { throttler: "x/y", balance: -4, at_ms: 1_000, limit_per_s: 1, generation: 1, written_at_ms: 1_000 };
    await produceRaw(`${pipeline}.controller-state`, "bucket/x/y", JSON.stringify(value));

    const successor = await store(pipeline);
    await successor.claimWriter();
    assert.equal((await successor.catchUp()).throttlers.get("x/y")?.balance?.balance, -4);
    await successor.write({ throttlers: [{ ...old, balance: { balance: -2, atMs: 2_000 }, generation: 2 }] });
    await successor.write({ removedThrottlers: ["x/y"] });

    // A reader from offset 0: the misplaced record was deleted at its Kafka key, so nothing comes back.
    const reader = await store(pipeline);
    assert.equal((await reader.catchUp()).throttlers.has("x/y"), false);
    const written = await readRaw(`${pipeline}.controller-state`);
    const tombstones = new Set(written.filter((m) => m.value === null).map((m) => m.key));
    assert.deepEqual([...tombstones].sort(), ["bucket/x%2Fy", "bucket/x/y"], `the old Kafka key was deleted too: ${JSON.stringify(written)}`);
  });
});
