// services: kafka
// A real Kafka broker end to end with kafkajs: create a 3-partition topic, produce 1,000 messages,
// consume them all back through a consumer group, and compare.
//
// The broker comes from KAFKA_BROKERS (set by scripts/test.mjs, which starts one with
// scripts/kafka.mjs when needed); when that is unset this file starts one itself with
// ensureKafka() and stops it afterwards.
//
//   pnpm test test/e2e/kafka-broker.test.ts
//   node --import tsx --test test/e2e/kafka-broker.test.ts
process.env.KAFKAJS_NO_PARTITIONER_WARNING = "1";

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { Kafka, Partitioners, logLevel } from "kafkajs";
import type { Admin, Consumer, Message, Producer, RecordMetadata } from "kafkajs";

interface KafkaHandle {
  brokers: string;
  stop(): Promise<void>;
}

const TOPIC = `sluice-e2e-broker-${randomUUID()}`;
const GROUP = `sluice-e2e-group-${randomUUID()}`;
const PARTITIONS = 3;
const COUNT = 1_000;
const CONSUME_TIMEOUT_MS = 60_000;

let handle: KafkaHandle | undefined;
let admin: Admin | undefined;
let producer: Producer | undefined;
let consumer: Consumer | undefined;

async function brokerFromEnvOrStart(): Promise<KafkaHandle> {
  const fromEnv = process.env["KAFKA_BROKERS"];
  if (fromEnv !== undefined && fromEnv.trim() !== "") return { brokers: fromEnv.trim(), stop: async () => {} };
  // Not a literal so that tsc does not look for types of the plain-JS script.
  const script = new URL("../../scripts/kafka.mjs", import.meta.url).href;
  const mod = (await import(script)) as { ensureKafka(): Promise<KafkaHandle> };
  return mod.ensureKafka();
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what()}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

before(async () => {
  handle = await brokerFromEnvOrStart();
});

after(async () => {
  // Each step bounded and independent, so one failure does not leave the others open.
  const quietly = async (what: string, step: () => Promise<unknown>) => {
    try {
      await withTimeout(step(), 30_000, () => what);
    } catch (err) {
      console.error(`cleanup: ${what}: ${String(err)}`);
    }
  };
  if (consumer) await quietly("consumer.disconnect", () => consumer!.disconnect());
  if (producer) await quietly("producer.disconnect", () => producer!.disconnect());
  if (admin) {
    await quietly("admin.deleteTopics", () => admin!.deleteTopics({ topics: [TOPIC], timeout: 10_000 }));
    await quietly("admin.disconnect", () => admin!.disconnect());
  }
  if (handle) await quietly("stop broker", () => handle!.stop());
});

test("kafkajs round trip through a real broker: 3 partitions, 1,000 messages, one consumer group", { timeout: 300_000 }, async (t) => {
  assert.ok(handle, "no broker");
  const kafka = new Kafka({
    clientId: "sluice-e2e",
    brokers: handle.brokers.split(",").map((b) => b.trim()),
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5_000,
    requestTimeout: 15_000,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 3_000 },
  });

  const t0 = Date.now();
  admin = kafka.admin();
  await withTimeout(admin.connect(), 30_000, () => `admin.connect to ${handle?.brokers}`);
  const created = await withTimeout(
    admin.createTopics({
      topics: [{ topic: TOPIC, numPartitions: PARTITIONS, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 15_000,
    }),
    30_000,
    () => `createTopics ${TOPIC}`,
  );
  assert.equal(created, true, `topic ${TOPIC} was not created`);
  const metadata = await admin.fetchTopicMetadata({ topics: [TOPIC] });
  assert.equal(metadata.topics[0]?.partitions.length, PARTITIONS);
  const tCreated = Date.now();

  producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false });
  await withTimeout(producer.connect(), 30_000, () => "producer.connect");
  const produced = new Set<string>();
  for (let start = 0; start < COUNT; start += 100) {
    const messages: Message[] = [];
    for (let i = start; i < Math.min(start + 100, COUNT); i++) {
      const value = `value-${i}`;
      produced.add(value);
      messages.push({ key: `key-${i}`, value });
    }
    const results: RecordMetadata[] = await withTimeout(producer.send({ topic: TOPIC, messages }), 30_000, () => `producer.send at ${start}`);
    for (const r of results) assert.equal(r.errorCode, 0, `produce error ${r.errorCode} on partition ${r.partition}`);
  }
  assert.equal(produced.size, COUNT);
  const tProduced = Date.now();

  // The keys spread the messages over every partition.
  const offsets = await admin.fetchTopicOffsets(TOPIC);
  assert.equal(offsets.length, PARTITIONS);
  const perPartition = offsets.map((o) => Number(o.high) - Number(o.low));
  assert.equal(
    perPartition.reduce((a, b) => a + b, 0),
    COUNT,
  );
  for (const n of perPartition) assert.ok(n > 0, `a partition got no messages: ${perPartition.join(", ")}`);

  consumer = kafka.consumer({ groupId: GROUP, maxWaitTimeInMs: 500, sessionTimeout: 10_000, heartbeatInterval: 1_000 });
  await withTimeout(consumer.connect(), 30_000, () => "consumer.connect");
  await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
  const consumed = new Set<string>();
  const partitionsSeen = new Set<number>();
  let deliveries = 0;
  let allConsumed!: () => void;
  const done = new Promise<void>((resolve) => {
    allConsumed = resolve;
  });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      deliveries++;
      partitionsSeen.add(partition);
      if (message.value) consumed.add(message.value.toString("utf8"));
      if (consumed.size >= COUNT) allConsumed();
    },
  });
  await withTimeout(done, CONSUME_TIMEOUT_MS, () => `consumed ${consumed.size} of ${COUNT} distinct values from ${TOPIC}`);
  const tConsumed = Date.now();

  assert.deepEqual([...consumed].sort(), [...produced].sort());
  assert.equal(partitionsSeen.size, PARTITIONS);
  t.diagnostic(
    `broker ${handle.brokers}: create topic ${tCreated - t0} ms, produce ${COUNT} in ${tProduced - tCreated} ms, ` +
      `consume in ${tConsumed - tProduced} ms (${deliveries} deliveries, per partition ${perPartition.join("/")})`,
  );
});
