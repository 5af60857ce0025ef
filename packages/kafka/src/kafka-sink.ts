import { Partitioners, type Kafka, type Message, type Producer, type ICustomPartitioner } from "kafkajs";
import { recordByteSize, type Sink, type SinkRecord } from "@sluice/runtime";
import type { PipelineSpec } from "@sluice/spec";
import { KAFKA_SINK_DEFAULTS } from "./defaults.ts";
import { asBuffer, toKafkaHeaders } from "./kafka-headers.ts";
import { KafkaIoError, describeError } from "./kafka-io-error.ts";
import { StreamTopics } from "./stream-topics.ts";

export interface KafkaSinkOptions {
  readonly maxRequestBytes?: number;
  readonly ackTimeoutMs?: number;
  readonly idempotent?: boolean;
}

export interface KafkaSinkInit {
  readonly kafka: Kafka;
  readonly pipeline: PipelineSpec;
}

/**
 * The runtime's Sink over one kafkajs producer. Records go to the topic of their stream with
 * acks = all; the partition is the record's own, else murmur2 of the key exactly as Java's
 * DefaultPartitioner does it (so Java and Sluice producers agree on keyed placement), else
 * round-robin over the available partitions.
 */
export class KafkaSink implements Sink {
  private readonly producer: Producer;
  private readonly streams: StreamTopics;
  private readonly maxRequestBytes: number;
  private readonly ackTimeoutMs: number;
  private readonly inFlight = new Set<Promise<void>>();
  private connecting: Promise<void> | null = null;
  private closing: Promise<void> | null = null;

  constructor(init: KafkaSinkInit, options: KafkaSinkOptions = {}) {
    this.streams = StreamTopics.of(init.pipeline);
    this.maxRequestBytes = options.maxRequestBytes ?? KAFKA_SINK_DEFAULTS.maxRequestBytes;
    this.ackTimeoutMs = options.ackTimeoutMs ?? KAFKA_SINK_DEFAULTS.ackTimeoutMs;
    const idempotent = options.idempotent ?? KAFKA_SINK_DEFAULTS.idempotent;
    this.producer = init.kafka.producer({
      createPartitioner: checkedPartitioner,
      allowAutoTopicCreation: false,
      idempotent,
      ...(idempotent ? { maxInFlightRequests: 1 } : {}),
    });
  }

  /** Resolves once every record is acknowledged by all in-sync replicas; order is kept per partition. */
  send(stream: string, records: readonly SinkRecord[]): Promise<void> {
    if (this.closing) {
      return Promise.reject(new KafkaIoError("CLOSED", `send of ${records.length} record(s) to stream "${stream}": the sink is closed`, { stream }));
    }
    const sending = this.sendAll(stream, records);
    this.inFlight.add(sending);
    const forget = () => this.inFlight.delete(sending);
    sending.then(forget, forget);
    return sending;
  }

  /** Waits for sends in flight, then disconnects the producer. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([...this.inFlight]);
      await this.producer.disconnect();
    })();
    return this.closing;
  }

  private async sendAll(stream: string, records: readonly SinkRecord[]): Promise<void> {
    const { topic } = this.streams.stream(stream, "send");
    if (records.length === 0) return;
    const messages = records.map((record, index) => toMessage(record, index, stream));
    await this.connect();
    let sent = 0;
    for (const chunk of chunksOf(records, messages, this.maxRequestBytes)) {
      try {
        await this.producer.send({ topic, messages: chunk, acks: -1, timeout: this.ackTimeoutMs });
      } catch (error) {
        throw new KafkaIoError(
          "SEND_FAILED",
          `send to stream "${stream}" (topic "${topic}") failed after ${sent} of ${records.length} record(s) were acknowledged: ${describeError(error)}`,
          { stream, topic, acknowledged: sent, records: records.length },
          { cause: error },
        );
      }
      sent += chunk.length;
    }
  }

  private connect(): Promise<void> {
    this.connecting ??= this.producer.connect().catch((error: unknown) => {
      this.connecting = null; // the next send tries again
      throw new KafkaIoError("SEND_FAILED", `the producer could not connect: ${describeError(error)}`, {}, { cause: error });
    });
    return this.connecting;
  }
}

export function toMessage(record: SinkRecord, index: number, stream: string): Message {
  const { partition, timestampMs } = record;
  if (partition !== undefined && !(Number.isInteger(partition) && partition >= 0)) {
    throw new KafkaIoError("INVALID_RECORD", `record ${index} for stream "${stream}" asks for partition ${partition}; a partition is an integer ≥ 0`, {
      stream,
      index,
      partition,
    });
  }
  if (timestampMs !== undefined && !(Number.isSafeInteger(timestampMs) && timestampMs >= 0)) {
    throw new KafkaIoError(
      "INVALID_RECORD",
      `record ${index} for stream "${stream}" has timestampMs ${timestampMs}; a timestamp is an integer ≥ 0 (epoch ms)`,
      {
        stream,
        index,
        timestampMs,
      },
    );
  }
  return {
    key: record.key === null ? null : asBuffer(record.key),
    value: record.value === null ? null : asBuffer(record.value),
    ...(record.headers ? { headers: toKafkaHeaders(record.headers) } : {}),
    ...(partition !== undefined ? { partition } : {}),
    ...(timestampMs !== undefined ? { timestamp: String(timestampMs) } : {}),
  };
}

/** Consecutive runs of messages whose record bytes stay under the limit (a bigger record goes alone). */
function chunksOf(records: readonly SinkRecord[], messages: readonly Message[], maxBytes: number): Message[][] {
  const chunks: Message[][] = [];
  let chunk: Message[] = [];
  let bytes = 0;
  messages.forEach((message, index) => {
    const record = records[index];
    const size = record ? recordByteSize({ key: record.key, value: record.value, headers: record.headers ?? {} }) : 0;
    if (chunk.length > 0 && bytes + size > maxBytes) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(message);
    bytes += size;
  });
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * kafkajs's DefaultPartitioner (Java-compatible murmur2), refusing an explicit partition the topic
 * does not have: kafkajs would otherwise retry the produce until it times out.
 */
export const checkedPartitioner: ICustomPartitioner = () => {
  const partition = Partitioners.DefaultPartitioner();
  return (args) => {
    const explicit = args.message.partition;
    if (explicit !== undefined && explicit !== null && explicit >= args.partitionMetadata.length) {
      throw new KafkaIoError(
        "INVALID_RECORD",
        `a record asks for partition ${explicit} of topic "${args.topic}", which has ${args.partitionMetadata.length} partition(s) (0..${args.partitionMetadata.length - 1})`,
        { topic: args.topic, partition: explicit, partitions: args.partitionMetadata.length },
      );
    }
    return partition(args);
  };
};
