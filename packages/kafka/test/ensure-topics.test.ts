// services: kafka
// ensureTopics creates the missing topic of every stream with its declared partition count and
// leaves existing topics as they are; a replication factor the cluster cannot meet is refused with
// the topics and brokers named.
import assert from "node:assert/strict";
import { test } from "node:test";
import { KafkaIoFactory, isKafkaIoError } from "../src/index.ts";
import { createTopic, pipelineSpec, uniqueName, useBroker, withTimeout } from "./kafka-test-kit.ts";

const broker = useBroker();

async function partitionCounts(topics: readonly string[]): Promise<Record<string, number>> {
  const metadata = await broker.admin.fetchTopicMetadata({ topics: [...topics] });
  return Object.fromEntries(metadata.topics.map((t) => [t.name, t.partitions.length]));
}

test("ensureTopics creates missing topics with the declared partitions and leaves an existing one untouched", { timeout: 60_000 }, async (t) => {
  const existing = uniqueName("sluice-ensure-existing");
  const created3 = uniqueName("sluice-ensure-new3");
  const created1 = uniqueName("sluice-ensure-new1");
  broker.cleanup.push(["deleteTopics", () => broker.admin.deleteTopics({ topics: [existing, created3, created1], timeout: 10_000 })]);
  await createTopic(broker.admin, existing, 2);
  const spec = pipelineSpec({
    pipeline: uniqueName("ensure"),
    brokers: broker.brokers,
    streams: {
      old: { topic: existing, partitions: 5 },
      wide: { topic: created3, partitions: 3 },
      narrow: { topic: created1, partitions: 1 },
    },
    computations: { C: { inputs: ["old"], outputs: ["wide", "narrow"] } },
  });
  const factory = new KafkaIoFactory(spec, { logLevel: "nothing" });
  broker.cleanup.push(["factory.close", () => factory.close()]);

  const t0 = Date.now();
  const first = await withTimeout(factory.ensureTopics(), 30_000, () => "ensureTopics");
  const tFirst = Date.now();
  assert.deepEqual(
    [...first.created].sort((a, b) => a.stream.localeCompare(b.stream)),
    [
      { stream: "narrow", topic: created1, partitions: 1, declaredPartitions: 1 },
      { stream: "wide", topic: created3, partitions: 3, declaredPartitions: 3 },
    ],
  );
  assert.deepEqual(first.existing, [{ stream: "old", topic: existing, partitions: 2, declaredPartitions: 5 }], "reported as it is, not grown to 5");
  assert.deepEqual(await partitionCounts([existing, created3, created1]), { [existing]: 2, [created3]: 3, [created1]: 1 });

  const second = await withTimeout(factory.ensureTopics(), 30_000, () => "ensureTopics again");
  const tSecond = Date.now();
  assert.deepEqual(second.created, [], "nothing to create the second time");
  assert.equal(second.existing.length, 3);
  assert.deepEqual(await partitionCounts([existing, created3, created1]), { [existing]: 2, [created3]: 3, [created1]: 1 });
  t.diagnostic(`first call (2 created) ${tFirst - t0} ms, second call (none) ${tSecond - tFirst} ms`);
});

test("ensureTopics refuses a replication factor the cluster cannot meet, naming topics and brokers", { timeout: 60_000 }, async () => {
  const topic = uniqueName("sluice-ensure-rf");
  const spec = pipelineSpec({
    pipeline: uniqueName("ensure-rf"),
    brokers: broker.brokers,
    streams: { s: { topic, partitions: 1 } },
    computations: { C: { inputs: ["s"] } },
  });
  const factory = new KafkaIoFactory(spec, { logLevel: "nothing", topics: { replicationFactor: 3 } });
  broker.cleanup.push(["factory.close", () => factory.close()]);
  await assert.rejects(
    withTimeout(factory.ensureTopics(), 30_000, () => "ensureTopics rf 3"),
    (error: unknown) => {
      assert.ok(isKafkaIoError(error, "TOPIC_SETUP_FAILED"), String(error));
      assert.match(error.message, new RegExp(`"${topic}".*${broker.brokers.replaceAll(".", "\\.")}.*[Rr]eplication`));
      return true;
    },
  );
  assert.deepEqual(await broker.admin.listTopics().then((all) => all.filter((t) => t === topic)), []);
});
