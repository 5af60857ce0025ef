import type { Admin, ConfigResourceTypes } from "kafkajs";
import type { PipelineSpec } from "@sluice/spec";
import { ENSURE_TOPICS_DEFAULTS } from "./defaults.ts";
import { KafkaIoError, describeError } from "./kafka-io-error.ts";
import { StreamTopics } from "./stream-topics.ts";

export interface EnsureTopicsOptions {
  /** Replicas of each created topic. Default: the broker's `default.replication.factor`. */
  readonly replicationFactor?: number;
  readonly timeoutMs?: number;
}

export interface TopicState {
  readonly stream: string;
  readonly topic: string;
  /** Partitions the topic has now. */
  readonly partitions: number;
  /** `streams.<name>.partitions`; differs from `partitions` when an existing topic was made otherwise. */
  readonly declaredPartitions: number;
}

export interface EnsureTopicsResult {
  readonly created: readonly TopicState[];
  /** Topics that existed already and were left as they are. */
  readonly existing: readonly TopicState[];
}

/**
 * Creates the topic of every stream that has none, with the stream's declared partition count.
 * Existing topics are not touched (not even when their partition count differs: adding partitions
 * moves keys, which only an operator should decide). Safe to run from several workers at once.
 */
export async function ensureTopics(admin: Admin, spec: PipelineSpec, options: EnsureTopicsOptions = {}): Promise<EnsureTopicsResult> {
  const streams = StreamTopics.of(spec).all();
  const timeoutMs = options.timeoutMs ?? ENSURE_TOPICS_DEFAULTS.createTimeoutMs;
  const topicsOf = (list: readonly { topic: string }[]) => list.map((s) => `"${s.topic}"`).join(", ");
  try {
    const present = new Set(await admin.listTopics());
    const missing = streams.filter((s) => !present.has(s.topic));
    if (missing.length > 0) {
      const replicationFactor = options.replicationFactor ?? (await brokerReplicationFactor(admin));
      // false = another worker created them first, which is as good.
      await admin.createTopics({
        topics: missing.map((s) => ({ topic: s.topic, numPartitions: s.partitions, replicationFactor })),
        waitForLeaders: true,
        timeout: timeoutMs,
      });
    }
    const metadata = await admin.fetchTopicMetadata({ topics: streams.map((s) => s.topic) });
    const partitionsOf = new Map(metadata.topics.map((t) => [t.name, t.partitions.length]));
    const state = (s: (typeof streams)[number]): TopicState => ({
      stream: s.stream,
      topic: s.topic,
      partitions: partitionsOf.get(s.topic) ?? 0,
      declaredPartitions: s.partitions,
    });
    return {
      created: missing.map(state),
      existing: streams.filter((s) => present.has(s.topic)).map(state),
    };
  } catch (error) {
    throw new KafkaIoError(
      "TOPIC_SETUP_FAILED",
      `could not ensure topics ${topicsOf(streams)} of pipeline "${spec.pipeline}" on brokers ${spec.kafka?.brokers.join(", ") ?? "(none)"}: ${describeError(error)}`,
      { pipeline: spec.pipeline, topics: streams.map((s) => s.topic) },
      { cause: error },
    );
  }
}

/**
 * What CreateTopics' replication factor -1 would mean (the broker default); kafkajs speaks
 * CreateTopics v3, which predates -1, so it is read from the broker's config instead.
 */
// kafkajs's CommonJS index is not fully visible to ESM named imports (ConfigResourceTypes is not).
const BROKER_RESOURCE: ConfigResourceTypes.BROKER = 4;

export async function brokerReplicationFactor(admin: Admin): Promise<number> {
  const fallback = ENSURE_TOPICS_DEFAULTS.fallbackReplicationFactor;
  try {
    const cluster = await admin.describeCluster();
    const broker = cluster.brokers[0];
    if (!broker) return fallback;
    const described = await admin.describeConfigs({
      resources: [{ type: BROKER_RESOURCE, name: String(broker.nodeId), configNames: ["default.replication.factor"] }],
      includeSynonyms: false,
    });
    const value = Number(described.resources[0]?.configEntries.find((e) => e.configName === "default.replication.factor")?.configValue);
    return Number.isInteger(value) && value > 0 ? value : fallback;
  } catch {
    return fallback;
  }
}
