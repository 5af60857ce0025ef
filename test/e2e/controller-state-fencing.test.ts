// services: kafka
// The controller state on a real broker (docs/design.md §5.3): Kafka, not our numbers, orders and fences
// it. Each store here is what one controller process has (its reader, its claim on the writer).
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { Consumer } from "kafkajs";
import { StateWriterFencedError, type ControllerState, type PersistedThrottler } from "@sluice/failover-ports";
import { KafkaControllerStateStore, STATE_TOPIC_CONFIG } from "@sluice/kafka";
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

const rows = (balance: number, generation: number): PersistedThrottler => ({
  throttlerId: "rows",
  balance: { balance, atMs: 1_000 },
  limitPerSecond: 5,
  generation,
  writtenAtMs: 1_000,
});
const spec = (version: number, generation: number) => ({ version, dynamicSpecJson: "{}", generation, writtenAtMs: 1_000 });

describe("controller state on Kafka: fenced writes, offset order", () => {
  it("the latest committed record wins whatever its generation: a group deleted and rejoined starts again at 1", async () => {
    const pipeline = uniqueName("state-gen");
    const old = await store(pipeline);
    await old.claimWriter();
    await old.write({ spec: spec(5, 9), throttlers: [rows(-40, 9)] });
    // The empty election group was deleted: the next leadership is generation 1.
    const next = await store(pipeline);
    await next.claimWriter();
    const read = await next.catchUp();
    assert.equal(read.spec?.version, 5);
    await next.write({ spec: spec(6, 1), throttlers: [rows(-45, 1)] });
    const fresh = await (await store(pipeline)).catchUp();
    assert.equal(fresh.spec?.version, 6, "the reconfiguration of generation 1 is in force");
    assert.equal(fresh.throttlers.get("rows")?.balance?.balance, -45, "the newer balance (in debt), not generation 9's");
  });

  it("a deposed leader's late write is refused by Kafka and never becomes the latest record, committed or not", async () => {
    const pipeline = uniqueName("state-fence");
    const deposed = await store(pipeline);
    await deposed.claimWriter();
    await deposed.write({ throttlers: [rows(10, 3)] });
    // A write of the old leader still open (kafkajs retrying across a network cut) when the successor claims.
    const raw = (await kafka()).producer({ transactionalId: `${pipeline}.controller`, idempotent: true, maxInFlightRequests: 1 });
    await raw.connect();
    const open = await raw.transaction();
    await open.send({
      topic: `${pipeline}.controller-state`,
      messages: [{ key: "bucket/rows", value: JSON.stringify({ throttler: "rows", balance: 99, at_ms: 1_000 }) }],
    });

    const successor = await store(pipeline);
    await successor.claimWriter();
    assert.equal((await successor.catchUp()).throttlers.get("rows")?.balance?.balance, 10, "the open write was aborted, not read");
    await successor.write({ throttlers: [rows(-5, 4)] });

    await assert.rejects(open.commit(), "the open transaction cannot commit after the successor's claim");
    await raw.disconnect().catch(() => undefined);
    await assert.rejects(deposed.write({ throttlers: [rows(50, 3)] }), (error: unknown) => {
      assert.ok(error instanceof StateWriterFencedError, `fenced, got ${String(error)}`);
      assert.match(error.message, /another controller claimed it/);
      return true;
    });
    const fresh = await (await store(pipeline)).catchUp();
    assert.equal(fresh.throttlers.get("rows")?.balance?.balance, -5);
    // Everything in the log, aborted records included: the late 50 is not there at all, so no
    // compaction can keep it as the latest of its key.
    const all = await everyValue(`${pipeline}.controller-state`, 4);
    assert.ok(!all.some((v) => v.includes('"balance":50')), `the late write is not in the log: ${all.join(" | ")}`);
  });

  it("a reader that reads the topic again from offset 0 never goes back, and ends where it was", async () => {
    const pipeline = uniqueName("state-reread");
    const writer = await store(pipeline);
    await writer.claimWriter();
    for (let v = 1; v <= 5; v++) await writer.write({ spec: spec(v, 1), throttlers: [rows(-v, 1)] });
    const reader = await store(pipeline);
    const before = await reader.catchUp();
    assert.equal(before.spec?.version, 5);
    // What a reader restart does (nothing is committed, so it starts at 0): seek back, watch every state on the way.
    const seen: ControllerState[] = [];
    const internals = reader as unknown as { reader: { consumer: Consumer | null }; fold: { apply(...args: unknown[]): boolean } };
    const apply = internals.fold.apply.bind(internals.fold);
    internals.fold.apply = (...args: unknown[]) => {
      const changed = apply(...args);
      seen.push(reader.latest());
      return changed;
    };
    internals.reader.consumer?.seek({ topic: `${pipeline}.controller-state`, partition: 0, offset: "0" });
    const deadline = Date.now() + 20_000;
    while (seen.length < 10 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(seen.length >= 10, `read the 10 records again (${seen.length})`);
    for (const state of seen) {
      assert.equal(state.spec?.version, 5, "never an older spec while re-reading");
      assert.equal(state.throttlers.get("rows")?.balance?.balance, -5, "never an older balance while re-reading");
    }
    assert.deepEqual(await reader.catchUp(), before);
  });

  it("creates the topic compacted, gzip-compressed, with a batch limit every record fits", async () => {
    const pipeline = uniqueName("state-config");
    await store(pipeline);
    const configs = await withAdmin((admin) =>
      admin.describeConfigs({
        resources: [{ type: 2, name: `${pipeline}.controller-state`, configNames: Object.keys(STATE_TOPIC_CONFIG) }],
        includeSynonyms: false,
      }),
    );
    const got = Object.fromEntries((configs.resources[0]?.configEntries ?? []).map((e) => [e.configName, e.configValue]));
    assert.deepEqual(got, STATE_TOPIC_CONFIG);
  });
});

/** Every record value of the topic, aborted transactions included (read_uncommitted). */
async function everyValue(topic: string, atLeast: number): Promise<string[]> {
  const consumer = (await kafka()).consumer({ groupId: uniqueName("raw"), readUncommitted: true });
  const values: string[] = [];
  try {
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void values.push(message.value?.toString("utf8") ?? "null") });
    const deadline = Date.now() + 15_000;
    while (values.length < atLeast && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    await new Promise((resolve) => setTimeout(resolve, 500));
  } finally {
    await consumer.disconnect();
  }
  return values;
}
