// services: kafka
// KafkaSink against the broker: keyless records spread over the partitions, an emit larger than
// one produce request is split and arrives whole and in order, an explicit partition the topic
// lacks and an undeclared stream are refused with the figures.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { SinkRecord } from "@sluice/runtime";
import { KafkaIoFactory, isKafkaIoError } from "../src/index.ts";
import { endOffsets, pipelineSpec, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const PARTITIONS = 3;
const encoder = new TextEncoder();

const broker = useBroker();

async function setup(prefix: string) {
  const topic = uniqueName(`sluice-sink-${prefix}`);
  const spec = pipelineSpec({
    pipeline: uniqueName(`sink-${prefix}`),
    brokers: broker.brokers,
    streams: { out: { topic, partitions: PARTITIONS } },
    computations: { C: { inputs: ["out"] } },
  });
  const factory = new KafkaIoFactory(spec, { logLevel: "nothing" });
  broker.cleanup.push(["factory.close", () => factory.close()], ["deleteTopics", () => broker.admin.deleteTopics({ topics: [topic], timeout: 10_000 })]);
  await factory.ensureTopics();
  return { topic, spec, sink: factory.createSink(spec) };
}

test("keyless records are spread over every partition", { timeout: 30_000 }, async () => {
  const { topic, sink } = await setup("spread");
  const records: SinkRecord[] = Array.from({ length: 300 }, (_, i) => ({ key: null, value: encoder.encode(String(i)) }));
  await withTimeout(sink.send("out", records), 20_000, () => "send");
  const counts = [...(await endOffsets(broker.admin, topic)).values()].map(Number);
  assert.equal(
    counts.reduce((a, b) => a + b, 0),
    300,
  );
  for (const n of counts) assert.ok(n >= 50, `each partition gets a share: ${counts.join("/")}`);
  await sink.close();
  await sink.close();
  await assert.rejects(sink.send("out", records), (error: unknown) => isKafkaIoError(error, "CLOSED"));
});

test("an emit larger than one produce request (2,000 × 1 KiB to one partition) is split and arrives whole, in order", { timeout: 40_000 }, async (t) => {
  const { topic, sink } = await setup("big");
  const value = new Uint8Array(1_024).fill(120);
  const records: SinkRecord[] = Array.from({ length: 2_000 }, (_, i) => ({ key: encoder.encode(String(i)), value, partition: 1 }));
  const t0 = Date.now();
  await withTimeout(sink.send("out", records), 30_000, () => "send 2 MiB");
  const sendMs = Date.now() - t0;
  const ends = await endOffsets(broker.admin, topic);
  assert.equal(ends.get(1), "2000");

  const consumer = broker.kafka.consumer({ groupId: uniqueName("sink-check"), maxWaitTimeInMs: 200 });
  broker.cleanup.push(["check consumer", () => consumer.disconnect()]);
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const keys: string[] = [];
  await consumer.run({ eachMessage: async ({ message }) => void keys.push(message.key?.toString() ?? "") });
  await waitFor(
    () => keys.length >= 2_000,
    20_000,
    () => `${keys.length} of 2000 read back`,
  );
  assert.deepEqual(
    keys,
    records.map((_, i) => String(i)),
  );
  t.diagnostic(`2,000 records of 1 KiB (2 MiB) acknowledged in ${sendMs} ms`);
});

test("a partition the topic does not have and an undeclared stream are refused", { timeout: 30_000 }, async () => {
  const { topic, sink } = await setup("invalid");
  await assert.rejects(
    withTimeout(sink.send("out", [{ key: null, value: null, partition: 7 }]), 10_000, () => "send to partition 7"),
    (error: unknown) => {
      assert.ok(isKafkaIoError(error, "SEND_FAILED"), String(error));
      assert.match(error.message, new RegExp(`partition 7 of topic "${topic}", which has 3 partition\\(s\\)`));
      return true;
    },
  );
  await assert.rejects(sink.send("missing", [{ key: null, value: null }]), (error: unknown) => {
    assert.ok(isKafkaIoError(error, "KAFKA_SPEC_INVALID"), String(error));
    assert.match(error.message, /stream "missing" is not declared .*streams: "out"/);
    return true;
  });
  await assert.rejects(sink.send("out", [{ key: null, value: null, partition: -1 }]), (error: unknown) => isKafkaIoError(error, "INVALID_RECORD"));
});
