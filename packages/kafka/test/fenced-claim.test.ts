// services: kafka
// delivery "exactly_once": a source whose producer is fenced while the group still assigns it the
// partition — what a member that missed a whole generation during a broker outage sees, since
// kafkajs has no KIP-447 generation fencing — claims the partition back after a session timeout
// and goes on from the committed offset, instead of waiting for a rebalance that never comes. The
// fencing here is another producer taking the partition's transactional id (InitProducerId), on
// the shared broker; a read_committed reader then sees every input exactly once. About 15 s.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { BatchHandler, SinkRecord } from "@sluice/runtime";
import { KafkaIoFactory, isKafkaIoError, type KafkaIoError } from "../src/index.ts";
import { createTopic, pipelineSpec, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const COUNT = 400;
const SESSION_TIMEOUT_MS = 6_000;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const broker = useBroker();

/** Every value in `topic` a read_committed consumer sees, once `count` arrived (or the timeout passed). */
async function readCommitted(topic: string, count: number, timeoutMs: number): Promise<string[]> {
  const consumer = broker.kafka.consumer({ groupId: uniqueName("reader"), readUncommitted: false });
  const values: string[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void values.push(decoder.decode(message.value ?? new Uint8Array())) });
    const deadline = Date.now() + timeoutMs;
    while (values.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // a duplicate after the last one would show
    return values;
  } finally {
    await consumer.disconnect();
  }
}

test("a fenced lease still assigned here claims its partition back and relays every input exactly once", { timeout: 90_000 }, async (t) => {
  const input = uniqueName("sluice-fenced-in");
  const output = uniqueName("sluice-fenced-out");
  const spec = pipelineSpec({
    pipeline: uniqueName("fenced"),
    brokers: broker.brokers,
    streams: { events: { topic: input, partitions: 1 }, out: { topic: output, partitions: 1 } },
    computations: { Relay: { inputs: ["events"], outputs: ["out"] } },
  });
  const errors: KafkaIoError[] = [];
  const factory = new KafkaIoFactory(spec, {
    logLevel: "nothing",
    source: {
      maxBytesPerPartition: 1_024,
      heartbeatIntervalMs: 500,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      rebalanceTimeoutMs: 5_000,
      onError: (e) => errors.push(e),
    },
  });
  broker.cleanup.push(
    ["factory.close", () => factory.close()],
    ["deleteTopics", () => broker.admin.deleteTopics({ topics: [input, output], timeout: 10_000 })],
  );
  await createTopic(broker.admin, input, 1);
  await createTopic(broker.admin, output, 1);
  const records: SinkRecord[] = Array.from({ length: COUNT }, (_, i) => ({ key: null, value: encoder.encode(String(i)), partition: 0 }));
  // Eight sends, so eight record batches in the log: the broker hands a whole record batch to a
  // fetch, and the fence must fall between two of the source's batches.
  const sink = factory.createSink(spec);
  for (let i = 0; i < COUNT; i += COUNT / 8) await withTimeout(sink.send("events", records.slice(i, i + COUNT / 8)), 20_000, () => "send the inputs");

  const source = factory.createSource("Relay", { ...spec.computations["Relay"]!, delivery: "exactly_once" }, spec);
  const groupId = source.groupId;
  let relayed = 0;
  let fencedAt: number | null = null;
  const failures: unknown[] = [];
  const fenceFromOutside = async () => {
    // Takes the partition's transactional id over, as another member's claim would.
    const intruder = broker.kafka.producer({ transactionalId: `${groupId}-${input}-0`, idempotent: true, maxInFlightRequests: 1 });
    await intruder.connect();
    const transaction = await intruder.transaction();
    await transaction.abort();
    await intruder.disconnect();
    fencedAt = Date.now();
  };
  const handler: BatchHandler = async (batch, context) => {
    if (relayed >= COUNT / 4 && fencedAt === null) await fenceFromOutside();
    const last = batch.records[batch.records.length - 1];
    if (!last || !context.beginTransaction) return;
    let transaction: Awaited<ReturnType<NonNullable<typeof context.beginTransaction>>> | undefined;
    try {
      transaction = await context.beginTransaction();
      await transaction.send(
        "out",
        batch.records.map((r) => ({ key: r.key, value: r.value, partition: 0 })),
      );
      await transaction.commit((BigInt(last.offset) + 1n).toString());
      relayed += batch.records.length;
    } catch (error) {
      failures.push(error);
      await transaction?.abort();
      context.rewind();
    }
  };
  await withTimeout(source.start(handler), 30_000, () => "source start");
  broker.cleanup.push(["source.close", () => source.close()]);
  await waitFor(
    () => relayed >= COUNT,
    60_000,
    () =>
      `all ${COUNT} inputs relayed (relayed ${relayed}; failures: ${failures.map(String).join(" | ")}; errors: ${errors.map((e) => e.message).join(" | ")})`,
  );
  const resumedAfterMs = Date.now() - (fencedAt ?? Date.now());
  t.diagnostic(`fenced after ${COUNT / 4}+ inputs; ${failures.length} failed transaction(s); all relayed ${resumedAfterMs} ms after the fence`);

  assert.ok(fencedAt !== null, "the producer was fenced mid-stream");
  assert.ok(
    failures.some((e) => isKafkaIoError(e) && e.code === "PARTITION_REVOKED"),
    `a transaction after the fence was refused as fenced (failures: ${failures.map(String).join(" | ")})`,
  );
  const values = await readCommitted(output, COUNT, 30_000);
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  const missing = Array.from({ length: COUNT }, (_, i) => String(i)).filter((v) => !counts.has(v));
  const repeated = [...counts].filter(([, n]) => n > 1);
  assert.deepEqual({ missing: missing.slice(0, 5), repeated: repeated.slice(0, 5) }, { missing: [], repeated: [] }, `${values.length} outputs read`);
  assert.equal(values.length, COUNT);
});
