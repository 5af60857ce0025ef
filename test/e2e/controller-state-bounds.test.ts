// services: kafka
// Records at their documented bounds written to and read back from a real broker (docs/design.md §5.3):
// the single `buckets` record of before outgrew the broker's 1 MiB limit with eight busy concurrency
// throttlers, and then every grant failed.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { PERSISTED_HOLDERS_MAX, PERSISTED_REQUEST_IDS_MAX, type PersistedThrottler } from "@sluice/failover-ports";
import { KafkaControllerStateStore } from "@sluice/kafka";
import { concurrencyRecord, leasesOf } from "../../packages/kafka/test/state-record-fixtures.ts";
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

describe("controller state at its bounds on Kafka", () => {
  it("1,000 rate throttlers and 8 concurrency throttlers of 10,000 holders and 1,000 request ids each: one write, read back whole", async () => {
    const pipeline = uniqueName("state-bounds");
    const rate: PersistedThrottler[] = Array.from({ length: 1_000 }, (_, i) => ({
      throttlerId: `rate-${i}`,
      balance: { balance: -i, atMs: 1_700_000_000_000 },
      limitPerSecond: 50,
      generation: 1,
      writtenAtMs: 1_700_000_000_000,
    }));
    const leases = leasesOf(PERSISTED_HOLDERS_MAX, 64, PERSISTED_REQUEST_IDS_MAX);
    const concurrency = Array.from({ length: 8 }, (_, i) => ({ ...concurrencyRecord(leases), throttlerId: `tasks-${i}` }));
    const writer = await store(pipeline);
    await writer.claimWriter();
    await writer.write({ throttlers: [...rate, ...concurrency] });
    const read = await (await store(pipeline)).catchUp();
    assert.equal(read.throttlers.size, 1_008);
    assert.equal(read.throttlers.get("rate-999")?.balance?.balance, -999);
    for (let i = 0; i < 8; i++) {
      const tasks = read.throttlers.get(`tasks-${i}`)?.leases;
      assert.equal(Object.keys(tasks?.holders ?? {}).length, PERSISTED_HOLDERS_MAX, `tasks-${i} holders`);
      assert.equal(tasks?.requestIds.length, PERSISTED_REQUEST_IDS_MAX);
    }
  });
});
