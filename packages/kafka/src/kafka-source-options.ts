import type { Kafka } from "kafkajs";
import type { ComputationSpec, PipelineSpec } from "@sluice/spec";
import { KAFKA_SOURCE_DEFAULTS } from "./defaults.ts";
import type { KafkaIoError } from "./kafka-io-error.ts";

export interface KafkaSourceOptions {
  readonly sessionTimeoutMs?: number;
  readonly heartbeatIntervalMs?: number;
  readonly rebalanceTimeoutMs?: number;
  readonly transactionTimeoutMs?: number;
  readonly maxWaitTimeMs?: number;
  readonly maxBytesPerPartition?: number;
  readonly prefetchBatchesPerPartition?: number;
  readonly joinTimeoutMs?: number;
  readonly commitIntervalMs?: number;
  readonly maxCommitAttempts?: number;
  /**
   * Failures that have no caller to return to: a handler that threw (its partition is rewound), a
   * listener that threw, a consumer kafkajs will not restart. Default: a process warning.
   */
  readonly onError?: (error: KafkaIoError) => void;
}

export interface KafkaSourceInit {
  /** The kafkajs client; the source creates its own consumer from it. */
  readonly kafka: Kafka;
  readonly pipeline: PipelineSpec;
  readonly computation: string;
  /** Default: `pipeline.computations[computation]`. */
  readonly computationSpec?: ComputationSpec;
}

export type KafkaSourceSettings = Required<Omit<KafkaSourceOptions, "onError">>;

/** The options with every default filled in (defaults live in one place: defaults.ts). */
export function resolveSourceSettings(options: KafkaSourceOptions): KafkaSourceSettings {
  return {
    sessionTimeoutMs: options.sessionTimeoutMs ?? KAFKA_SOURCE_DEFAULTS.sessionTimeoutMs,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? KAFKA_SOURCE_DEFAULTS.heartbeatIntervalMs,
    rebalanceTimeoutMs: options.rebalanceTimeoutMs ?? KAFKA_SOURCE_DEFAULTS.rebalanceTimeoutMs,
    transactionTimeoutMs: options.transactionTimeoutMs ?? KAFKA_SOURCE_DEFAULTS.transactionTimeoutMs,
    maxWaitTimeMs: options.maxWaitTimeMs ?? KAFKA_SOURCE_DEFAULTS.maxWaitTimeMs,
    maxBytesPerPartition: options.maxBytesPerPartition ?? KAFKA_SOURCE_DEFAULTS.maxBytesPerPartition,
    prefetchBatchesPerPartition: options.prefetchBatchesPerPartition ?? KAFKA_SOURCE_DEFAULTS.prefetchBatchesPerPartition,
    joinTimeoutMs: options.joinTimeoutMs ?? KAFKA_SOURCE_DEFAULTS.joinTimeoutMs,
    commitIntervalMs: options.commitIntervalMs ?? KAFKA_SOURCE_DEFAULTS.commitIntervalMs,
    maxCommitAttempts: options.maxCommitAttempts ?? KAFKA_SOURCE_DEFAULTS.maxCommitAttempts,
  };
}
