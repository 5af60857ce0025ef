import { randomUUID } from "node:crypto";
import { Kafka, logLevel, type Admin } from "kafkajs";
import { createTopicWithLeaders } from "./kafka-topics.ts";

process.env["KAFKAJS_NO_PARTITIONER_WARNING"] = "1";

/** The broker the test command started (or KAFKA_BROKERS, or one started here). */
export async function brokers(): Promise<string[]> {
  const configured = process.env["KAFKA_BROKERS"];
  if (configured) return configured.split(",");
  // Not a literal, so that tsc does not look for types of the plain-JS script.
  const script = new URL("../../scripts/kafka.mjs", import.meta.url).href;
  const { ensureKafka } = (await import(script)) as { ensureKafka(): Promise<{ brokers: string }> };
  const started = await ensureKafka();
  process.env["KAFKA_BROKERS"] = started.brokers;
  return started.brokers.split(",");
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export async function kafka(): Promise<Kafka> {
  return new Kafka({ clientId: "sluice-e2e", brokers: await brokers(), logLevel: logLevel.NOTHING });
}

export async function withAdmin<T>(work: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = (await kafka()).admin();
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.disconnect();
  }
}

export async function createTopic(topic: string, partitions: number): Promise<void> {
  await withAdmin((admin) => createTopicWithLeaders(admin, topic, partitions));
}

/** Produces `count` JSON messages `{ id }` (ids from `firstId`) keyed by id, spread over partitions; `timestampMs(i)` sets event time. */
export async function produce(
  topic: string,
  count: number,
  options: { partition?: (i: number) => number; timestampMs?: (i: number) => number; firstId?: number } = {},
): Promise<void> {
  const firstId = options.firstId ?? 0;
  const producer = (await kafka()).producer();
  await producer.connect();
  try {
    for (let start = 0; start < count; start += 1000) {
      const messages = [];
      for (let i = start; i < Math.min(count, start + 1000); i++) {
        messages.push({
          key: `k${firstId + i}`,
          value: JSON.stringify({ id: firstId + i }),
          ...(options.partition ? { partition: options.partition(i) } : {}),
          ...(options.timestampMs ? { timestamp: String(options.timestampMs(i)) } : {}),
        });
      }
      await producer.send({ topic, messages, acks: -1 });
    }
  } finally {
    await producer.disconnect();
  }
}

export interface ConsumedMessage {
  readonly partition: number;
  readonly offset: string;
  readonly timestampMs: number;
  readonly value: Record<string, unknown>;
}

/**
 * Reads a topic from the beginning until `count` distinct messages arrived (by `value.id`, so
 * at-least-once duplicates do not count twice), or the timeout passes.
 */
export async function consumeAll(topic: string, count: number, timeoutMs = 60_000): Promise<ConsumedMessage[]> {
  const distinct = new Set<string>();
  const consumer = (await kafka()).consumer({ groupId: uniqueName("reader") });
  const out: ConsumedMessage[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    let done: () => void = () => {};
    const finished = new Promise<void>((resolve) => (done = resolve));
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        out.push({
          partition,
          offset: message.offset,
          timestampMs: Number(message.timestamp),
          value: JSON.parse(message.value?.toString() ?? "null") as Record<string, unknown>,
        });
        const value = out[out.length - 1]?.value;
        distinct.add(
          value && typeof value === "object" && "id" in value ? JSON.stringify([value["id"], value["computation"] ?? ""]) : `${partition}/${message.offset}`,
        );
        if (distinct.size >= count) done();
      },
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([finished, new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    return out;
  } finally {
    await consumer.disconnect();
  }
}

/** Committed offsets of a consumer group, summed over a topic's partitions. */
export async function committedTotal(groupId: string, topic: string): Promise<number> {
  return withAdmin(async (admin) => {
    const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return (entry?.partitions ?? []).reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
  });
}
