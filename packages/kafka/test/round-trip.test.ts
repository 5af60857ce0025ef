// services: kafka
// KafkaSink → Kafka → KafkaSource: 3,000 keyed records over a 3-partition topic, a handler that
// commits after each batch; every record arrives exactly once, in offset order per partition, with
// its timestamp, headers and byte size; the group's committed offsets end at the end offsets.
import assert from "node:assert/strict";
import { test } from "node:test";
import { recordByteSize, type PartitionRef, type SinkRecord, type SourceRecord } from "@sluice/runtime";
import { KafkaIoFactory } from "../src/index.ts";
import { committedOffsets, endOffsets, javaPartition, pipelineSpec, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const PARTITIONS = 3;
const COUNT = 3_000;
const SEND_SIZE = 100;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const broker = useBroker();

test("KafkaSink → KafkaSource round trip: 3 partitions, 3,000 keyed records, each exactly once and in order", { timeout: 60_000 }, async (t) => {
  const topic = uniqueName("sluice-rt");
  const spec = pipelineSpec({
    pipeline: uniqueName("rt"),
    brokers: broker.brokers,
    streams: { events: { topic, partitions: PARTITIONS } },
    computations: { Count: { inputs: ["events"] } },
  });
  const factory = new KafkaIoFactory(spec, { logLevel: "nothing", source: { heartbeatIntervalMs: 1_000, rebalanceTimeoutMs: 5_000 } });
  broker.cleanup.push(["factory.close", () => factory.close()], ["deleteTopics", () => broker.admin.deleteTopics({ topics: [topic], timeout: 10_000 })]);

  const t0 = Date.now();
  const ensured = await factory.ensureTopics();
  assert.deepEqual(
    ensured.created.map((c) => [c.topic, c.partitions]),
    [[topic, PARTITIONS]],
  );
  const tTopic = Date.now();

  const baseTimestamp = Date.UTC(2024, 0, 1);
  const sent: SinkRecord[] = [];
  for (let i = 0; i < COUNT; i++) {
    sent.push({
      key: encoder.encode(`key-${i}`),
      value: encoder.encode(JSON.stringify({ i })),
      headers: { seq: encoder.encode(String(i)), kind: encoder.encode(i % 2 === 0 ? "even" : "odd") },
      timestampMs: baseTimestamp + i,
    });
  }
  const sink = factory.createSink(spec);
  for (let start = 0; start < COUNT; start += SEND_SIZE) {
    await withTimeout(sink.send("events", sent.slice(start, start + SEND_SIZE)), 20_000, () => `send at ${start}`);
  }
  const tProduced = Date.now();

  const source = factory.createSource("Count", spec.computations["Count"]!, spec);
  const received = new Map<number, SourceRecord[]>();
  let total = 0;
  let batches = 0;
  const assignments: PartitionRef[][] = [];
  const revocations: PartitionRef[][] = [];
  const unexpectedRevocations: PartitionRef[][] = [];
  let closing = false;
  await withTimeout(
    source.start(
      async (batch, context) => {
        assert.equal(batch.stream, "events");
        batches++;
        const list = received.get(batch.partition) ?? [];
        received.set(batch.partition, list);
        list.push(...batch.records);
        total += batch.records.length;
        const last = batch.records[batch.records.length - 1];
        assert.ok(last, "empty batch");
        await context.commit((BigInt(last.offset) + 1n).toString());
      },
      {
        onAssigned: (refs) => assignments.push([...refs]),
        onRevoked: (refs) => (closing ? revocations : unexpectedRevocations).push([...refs]),
      },
    ),
    30_000,
    () => "source.start",
  );
  const tJoined = Date.now();
  assert.deepEqual(assignments, [[0, 1, 2].map((partition) => ({ stream: "events", partition }))]);

  await waitFor(
    () => total >= COUNT,
    40_000,
    () => `${total} of ${COUNT} records`,
  );
  const tConsumed = Date.now();

  assert.equal(total, COUNT, "no record may arrive twice");
  assert.deepEqual(unexpectedRevocations, []);
  const seen = new Set<number>();
  for (const [partition, records] of received) {
    records.forEach((record, index) => {
      assert.equal(record.offset, String(index), `partition ${partition}: offsets in order without gaps`);
      const i = (JSON.parse(decoder.decode(record.value ?? new Uint8Array())) as { i: number }).i;
      assert.ok(!seen.has(i), `record ${i} twice`);
      seen.add(i);
      const original = sent[i]!;
      assert.equal(record.timestampMs, baseTimestamp + i, `record ${i}: timestamp`);
      assert.deepEqual(Buffer.from(record.key ?? []), Buffer.from(original.key ?? []), `record ${i}: key`);
      assert.deepEqual(Object.fromEntries(Object.entries(record.headers).map(([k, v]) => [k, decoder.decode(v)])), {
        seq: String(i),
        kind: i % 2 === 0 ? "even" : "odd",
      });
      assert.equal(
        recordByteSize(record),
        recordByteSize({ key: original.key, value: original.value, headers: original.headers ?? {} }),
        `record ${i}: byteSize`,
      );
      assert.equal(partition, javaPartition(original.key!, PARTITIONS), `record ${i}: partition of its key as Java's DefaultPartitioner`);
    });
  }
  assert.equal(seen.size, COUNT);

  // Commits are awaited by the handler, so they are durable by now.
  const committed = await committedOffsets(broker.admin, source.groupId, topic);
  const ends = await endOffsets(broker.admin, topic);
  assert.deepEqual(committed, ends, "committed offsets = end offsets");
  const perPartition = [...ends.values()].join("/");

  const tClose0 = Date.now();
  closing = true;
  await withTimeout(source.close(), 30_000, () => "source.close");
  assert.deepEqual(revocations, assignments, "close() revokes what the source owned");
  await withTimeout(sink.close(), 30_000, () => "sink.close");
  await source.close(); // idempotent
  const tClosed = Date.now();
  t.diagnostic(
    `ensureTopics ${tTopic - t0} ms; produce ${COUNT} in ${tProduced - tTopic} ms; join ${tJoined - tProduced} ms; ` +
      `consume ${tConsumed - tJoined} ms in ${batches} batches (per partition ${perPartition}); close ${tClosed - tClose0} ms`,
  );
});
