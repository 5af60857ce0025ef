// Shared by the broker tests of @sluice/kafka: the broker (KAFKA_BROKERS from scripts/test.mjs, or
// one started here with ensureKafka()), unique names, parsed specs, bounded waits, and an
// independent murmur2 to check where keyed records land.
import { randomUUID } from "node:crypto";
import { after, before } from "node:test";
import { Kafka, logLevel, type Admin } from "kafkajs";
import { pipelineSpecSchema, type PipelineSpec } from "@sluice/spec";

export interface KafkaHandle {
  readonly brokers: string;
  stop(): Promise<void>;
}

export async function brokerFromEnvOrStart(): Promise<KafkaHandle> {
  const fromEnv = process.env["KAFKA_BROKERS"];
  if (fromEnv !== undefined && fromEnv.trim() !== "") return { brokers: fromEnv.trim(), stop: async () => {} };
  // Not a literal so that tsc does not look for types of the plain-JS script.
  const script = new URL("../../../scripts/kafka.mjs", import.meta.url).href;
  const mod = (await import(script)) as { ensureKafka(): Promise<KafkaHandle> };
  return mod.ensureKafka();
}

/** Topic, group and pipeline names that no other test (or earlier run) uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export interface SpecShape {
  readonly pipeline: string;
  readonly brokers: string;
  readonly streams: Record<string, { topic: string; partitions: number }>;
  readonly computations: Record<string, { inputs: string[]; outputs?: string[] }>;
}

export function pipelineSpec(shape: SpecShape): PipelineSpec {
  return pipelineSpecSchema.parse({
    pipeline: shape.pipeline,
    kafka: { brokers: shape.brokers.split(",").map((b) => b.trim()) },
    streams: shape.streams,
    computations: Object.fromEntries(
      Object.entries(shape.computations).map(([name, c]) => [name, { module: "./unused.ts", inputs: c.inputs, outputs: c.outputs ?? [] }]),
    ),
  });
}

/** A kafkajs admin for setting up and checking topics, quiet. */
export async function connectAdmin(brokers: string): Promise<{ admin: Admin; kafka: Kafka }> {
  const kafka = new Kafka({ clientId: "sluice-kafka-test", brokers: brokers.split(","), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await withTimeout(admin.connect(), 15_000, () => `admin.connect to ${brokers}`);
  return { admin, kafka };
}

export async function createTopic(admin: Admin, topic: string, partitions: number): Promise<void> {
  await withTimeout(
    admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true, timeout: 15_000 }),
    20_000,
    () => `createTopics ${topic}`,
  );
}

/** Committed offset of each partition of `topic` for `groupId` ("-1" = none). */
export async function committedOffsets(admin: Admin, groupId: string, topic: string): Promise<Map<number, string>> {
  const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map((entry?.partitions ?? []).map((p) => [p.partition, p.offset]));
}

export async function endOffsets(admin: Admin, topic: string): Promise<Map<number, string>> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return new Map(offsets.map((o) => [o.partition, o.high]));
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what()}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls `condition` every 20 ms until it holds; fails after `ms` with `what()`. */
export async function waitFor(condition: () => boolean, ms: number, what: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what()}`);
    await sleep(20);
  }
}

/** Resolves after `ms`, or early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Closes each thing with a bound, reporting instead of throwing, so that one failure leaves nothing open. */
export async function closeAll(steps: readonly (readonly [string, () => Promise<unknown>])[]): Promise<void> {
  for (const [what, step] of steps) {
    try {
      await withTimeout(step(), 30_000, () => what);
    } catch (error) {
      console.error(`cleanup: ${what}: ${String(error)}`);
    }
  }
}

type CleanupStep = readonly [string, () => Promise<unknown>];

/** What a test file of broker tests shares: the broker, an admin, and what to close after its tests. */
export interface BrokerFixture {
  readonly brokers: string;
  readonly admin: Admin;
  readonly kafka: Kafka;
  /** Steps run after the file's tests, last pushed first, each bounded; then the admin and the broker go. */
  readonly cleanup: { push(...steps: CleanupStep[]): void };
}

/**
 * Registers the file's before/after hooks: the broker and an admin are connected before its tests,
 * and everything pushed to `cleanup` is closed after them. Its fields can be read once the tests run.
 */
export function useBroker(): BrokerFixture {
  let handle: KafkaHandle | undefined;
  let connected: { admin: Admin; kafka: Kafka } | undefined;
  const steps: CleanupStep[] = [];
  before(async () => {
    handle = await brokerFromEnvOrStart();
    connected = await connectAdmin(handle.brokers);
  });
  after(async () => {
    await closeAll([...steps.reverse(), ["admin.disconnect", async () => connected?.admin.disconnect()], ["broker", async () => handle?.stop()]]);
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("useBroker(): read before its before() hook connected the broker");
    return value;
  };
  return {
    get brokers() {
      return ready(handle).brokers;
    },
    get admin() {
      return ready(connected).admin;
    },
    get kafka() {
      return ready(connected).kafka;
    },
    cleanup: { push: (...more) => void steps.push(...more) },
  };
}

/**
 * Java's `Utils.murmur2` (org.apache.kafka.common.utils), written from the algorithm and checked
 * against Kafka's own test vectors in record-conversion.test.ts, so that the partition a keyed
 * record lands on can be predicted independently of kafkajs.
 */
export function javaMurmur2(data: Uint8Array): number {
  const length = data.length;
  const seed = 0x9747b28c;
  const m = 0x5bd1e995;
  const r = 24;
  let h = (seed ^ length) | 0;
  const length4 = Math.floor(length / 4);
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k = (data[i4]! & 0xff) + ((data[i4 + 1]! & 0xff) << 8) + ((data[i4 + 2]! & 0xff) << 16) + ((data[i4 + 3]! & 0xff) << 24);
    k = Math.imul(k, m);
    k ^= k >>> r;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const tail = length4 * 4;
  const rest = length % 4;
  if (rest === 3) h ^= (data[tail + 2]! & 0xff) << 16;
  if (rest >= 2) h ^= (data[tail + 1]! & 0xff) << 8;
  if (rest >= 1) {
    h ^= data[tail]! & 0xff;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/** Java's DefaultPartitioner for a keyed record: `toPositive(murmur2(key)) % numPartitions`. */
export function javaPartition(key: Uint8Array, partitions: number): number {
  return (javaMurmur2(key) & 0x7fffffff) % partitions;
}
