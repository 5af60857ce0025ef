import type { Admin, Kafka } from "kafkajs";
import type { IoFactory } from "@sluice/runtime";
import type { ComputationSpec, PipelineSpec } from "@sluice/spec";
import { ensureTopics, type EnsureTopicsOptions, type EnsureTopicsResult } from "./ensure-topics.ts";
import { createKafkaClient, type KafkaClientOptions } from "./kafka-client.ts";
import { KafkaIoError } from "./kafka-io-error.ts";
import { KafkaSink, type KafkaSinkOptions } from "./kafka-sink.ts";
import { KafkaSource, type KafkaSourceOptions } from "./kafka-source.ts";

export interface KafkaIoFactoryOptions extends KafkaClientOptions {
  readonly source?: KafkaSourceOptions;
  readonly sink?: KafkaSinkOptions;
  readonly topics?: EnsureTopicsOptions;
}

/**
 * Sources and sinks of a pipeline over Kafka (the spec's `kafka` section), sharing one kafkajs
 * client. Each source is one consumer group `<pipeline>.<computation>`; each sink one producer.
 */
export class KafkaIoFactory implements IoFactory {
  /** The shared kafkajs client (tests and tools may use it for admin work). */
  readonly kafka: Kafka;
  private readonly closeables = new Set<{ close(): Promise<void> }>();
  private admin: Promise<Admin> | null = null;
  private closing: Promise<void> | null = null;

  constructor(
    private readonly spec: PipelineSpec,
    private readonly options: KafkaIoFactoryOptions = {},
  ) {
    this.kafka = createKafkaClient(spec, options);
  }

  createSource(computation: string, spec: ComputationSpec, pipeline: PipelineSpec): KafkaSource {
    this.refuseWhenClosed(`create the source of computation "${computation}"`);
    return this.track(new KafkaSource({ kafka: this.kafka, pipeline, computation, computationSpec: spec }, this.options.source));
  }

  createSink(pipeline: PipelineSpec): KafkaSink {
    this.refuseWhenClosed("create a sink");
    return this.track(new KafkaSink({ kafka: this.kafka, pipeline }, this.options.sink));
  }

  /** Creates the missing topics of every stream of `spec` (default: the factory's) with its declared partitions. */
  async ensureTopics(spec: PipelineSpec = this.spec, options: EnsureTopicsOptions = {}): Promise<EnsureTopicsResult> {
    this.refuseWhenClosed("ensure topics");
    return ensureTopics(await this.connectedAdmin(), spec, { ...this.options.topics, ...options });
  }

  /** Closes every source and sink it created, then its admin connection. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([...this.closeables].map((c) => c.close()));
      const admin = await this.admin?.catch(() => null);
      await admin?.disconnect();
    })();
    return this.closing;
  }

  private track<T extends { close(): Promise<void> }>(closeable: T): T {
    this.closeables.add(closeable);
    return closeable;
  }

  private connectedAdmin(): Promise<Admin> {
    this.admin ??= (async () => {
      const admin = this.kafka.admin();
      await admin.connect();
      return admin;
    })().catch((error: unknown) => {
      this.admin = null;
      throw error;
    });
    return this.admin;
  }

  private refuseWhenClosed(what: string): void {
    if (this.closing) throw new KafkaIoError("CLOSED", `cannot ${what}: the Kafka I/O factory of pipeline "${this.spec.pipeline}" is closed`);
  }
}
