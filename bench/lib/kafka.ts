import { Kafka, logLevel } from "kafkajs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createTopicWithLeaders } from "../../test/support/kafka-topics.ts";
import { ROOT } from "./paths.ts";

process.env["KAFKAJS_NO_PARTITIONER_WARNING"] = "1";

export interface Broker {
  readonly brokers: string[];
  /** Stops the broker only if this process started it. */
  stop(): Promise<void>;
}

/** Quick mode: the one broker of the run (see shareBroker); null when each ensureBroker() finds its own. */
let shared: Promise<Broker> | null = null;
let sharing = false;

/**
 * Quick mode runs its groups side by side: from here on every ensureBroker() gets the same broker
 * (found or started on the first call) and its stop() does nothing, so that no group stops a broker
 * another still reads. The returned function stops it, once every group is done.
 */
export function shareBroker(): () => Promise<void> {
  sharing = true;
  return async () => {
    const broker = shared;
    shared = null;
    sharing = false;
    await broker?.then(
      (found) => found.stop(),
      () => undefined,
    );
  };
}

export async function ensureBroker(): Promise<Broker> {
  if (!sharing) return findBroker();
  shared ??= findBroker();
  const broker = await shared;
  return { brokers: broker.brokers, stop: async () => {} };
}

/**
 * KAFKA_BROKERS when set (the test command sets it), else scripts/kafka.mjs's ensureKafka(): the
 * broker already listening on 127.0.0.1:19092, or a fresh Kafka started from its Maven jars.
 */
async function findBroker(): Promise<Broker> {
  const configured = process.env["KAFKA_BROKERS"];
  if (configured) return { brokers: configured.split(","), stop: async () => {} };
  // Not a literal import, so that tsc does not look for types of the plain-JS script.
  const script = pathToFileURL(join(ROOT, "scripts/kafka.mjs")).href;
  const { ensureKafka } = (await import(script)) as { ensureKafka(): Promise<{ brokers: string; stop(): Promise<void> }> };
  const started = await ensureKafka();
  return { brokers: started.brokers.split(","), stop: () => started.stop() };
}

export function kafkaClient(brokers: readonly string[]): Kafka {
  return new Kafka({ clientId: "sluice-bench", brokers: [...brokers], logLevel: logLevel.NOTHING });
}

export async function createTopic(brokers: readonly string[], topic: string, partitions: number): Promise<void> {
  const admin = kafkaClient(brokers).admin();
  await admin.connect();
  try {
    await createTopicWithLeaders(admin, topic, partitions);
  } finally {
    await admin.disconnect();
  }
}

/** `count` small JSON messages `{"id":n}`, round-robin over the partitions. */
export async function produce(brokers: readonly string[], topic: string, count: number, partitions: number): Promise<void> {
  const producer = kafkaClient(brokers).producer();
  await producer.connect();
  try {
    const chunk = 5000;
    for (let start = 0; start < count; start += chunk) {
      const messages = [];
      for (let i = start; i < Math.min(count, start + chunk); i++) messages.push({ value: JSON.stringify({ id: i }), partition: i % partitions });
      await producer.send({ topic, messages, acks: -1 });
    }
  } finally {
    await producer.disconnect();
  }
}
