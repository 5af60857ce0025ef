import { Kafka, logLevel as KafkaJsLogLevel, type LogEntry, type logCreator } from "kafkajs";
import type { PipelineSpec } from "@sluice/spec";
import { KAFKA_CLIENT_DEFAULTS } from "./defaults.ts";
import { KafkaIoError } from "./kafka-io-error.ts";

export type KafkaLogLevel = "nothing" | "error" | "warn" | "info" | "debug";

export interface KafkaLogEntry {
  readonly level: Exclude<KafkaLogLevel, "nothing">;
  /** kafkajs component, e.g. "Runner", "ConsumerGroup". */
  readonly namespace: string;
  readonly message: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

export interface KafkaClientOptions {
  /** Most verbose kafkajs level that is written. Default "warn". */
  readonly logLevel?: KafkaLogLevel;
  /** Where kafkajs log lines go; default: kafkajs's own JSON lines on the console. */
  readonly log?: (entry: KafkaLogEntry) => void;
  /** Default: `kafka.client_id` of the spec, else `sluice-<pipeline>`. */
  readonly clientId?: string;
  readonly connectionTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  readonly retries?: number;
}

const LEVELS: Record<KafkaLogLevel, KafkaJsLogLevel> = {
  nothing: KafkaJsLogLevel.NOTHING,
  error: KafkaJsLogLevel.ERROR,
  warn: KafkaJsLogLevel.WARN,
  info: KafkaJsLogLevel.INFO,
  debug: KafkaJsLogLevel.DEBUG,
};

const NAMES = new Map<KafkaJsLogLevel, Exclude<KafkaLogLevel, "nothing">>([
  [KafkaJsLogLevel.ERROR, "error"],
  [KafkaJsLogLevel.WARN, "warn"],
  [KafkaJsLogLevel.INFO, "info"],
  [KafkaJsLogLevel.DEBUG, "debug"],
]);

/** The one kafkajs client of a pipeline's `kafka` section. */
export function createKafkaClient(spec: PipelineSpec, options: KafkaClientOptions = {}): Kafka {
  const kafka = spec.kafka;
  if (kafka === undefined) {
    throw new KafkaIoError(
      "KAFKA_SPEC_INVALID",
      `pipeline "${spec.pipeline}" has no "kafka" section, so its streams are in-memory logs; add "kafka": { "brokers": ["host:port"] } to use Kafka`,
      { pipeline: spec.pipeline },
    );
  }
  const level = options.logLevel ?? KAFKA_CLIENT_DEFAULTS.logLevel;
  const log = options.log;
  return new Kafka({
    clientId: options.clientId ?? kafka.client_id ?? `sluice-${spec.pipeline}`,
    brokers: [...kafka.brokers],
    logLevel: LEVELS[level],
    ...(log ? { logCreator: forwardingLogCreator(log, level) } : {}),
    connectionTimeout: options.connectionTimeoutMs ?? KAFKA_CLIENT_DEFAULTS.connectionTimeoutMs,
    requestTimeout: options.requestTimeoutMs ?? KAFKA_CLIENT_DEFAULTS.requestTimeoutMs,
    retry: {
      retries: options.retries ?? KAFKA_CLIENT_DEFAULTS.retries,
      initialRetryTime: KAFKA_CLIENT_DEFAULTS.initialRetryTimeMs,
      maxRetryTime: KAFKA_CLIENT_DEFAULTS.maxRetryTimeMs,
    },
  });
}

/**
 * Failures kafkajs logs at ERROR on an attempt that it then retries, although they are part of normal
 * operation. The broker answers CONCURRENT_TRANSACTIONS to a transaction begun while the previous
 * one's commit markers are still being written, and expects the client to retry; the controller's
 * state writer commits back to back, so every leadership logged several of them. They are forwarded
 * as debug, so an error in a controller's log is one an operator has to look at.
 */
const ROUTINE_RETRIES: readonly RegExp[] = [/another concurrent operation on the same transaction/];

/** kafkajs log entries to `log`, with ROUTINE_RETRIES moved to debug (and dropped below that level). */
export function forwardingLogCreator(log: (entry: KafkaLogEntry) => void, level: KafkaLogLevel = "debug"): logCreator {
  return () =>
    ({ namespace, level: entryLevel, log: { message, timestamp: _timestamp, logger: _logger, ...fields } }: LogEntry) => {
      let name = NAMES.get(entryLevel);
      if (name === "error" && ROUTINE_RETRIES.some((routine) => routine.test(message))) {
        if (level !== "debug") return;
        name = "debug";
      }
      if (name) log({ level: name, namespace, message, fields });
    };
}
