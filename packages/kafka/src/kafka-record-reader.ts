// How the runtime reads kafkajs's messages: through a RecordReader, so that a fetched batch is
// handed to the job as kafkajs made it and each record becomes one object (the job's Message)
// rather than two (a SourceRecord, then the Message).
import type { KafkaMessage } from "kafkajs";
import type { NativeRecords, RecordReader, SourceBatch, SourceRecord } from "@sluice/runtime";
import { fromKafkaHeaders } from "./kafka-headers.ts";

let lastTimestampText = "";
let lastTimestampMs = Number.NaN;

/**
 * kafkajs hands every record's timestamp over as a decimal string of its own. Parsing it was one of
 * the largest per-record costs a Sluice consumer had over a bare one (a string-to-double conversion,
 * ~0.1–0.2 µs), and records of one batch mostly share their millisecond, so the last conversion is
 * kept: an equal string (compared by content) gives the same number.
 */
export function timestampMsOf(text: string): number {
  if (text !== lastTimestampText) {
    lastTimestampText = text;
    lastTimestampMs = Number(text);
  }
  return lastTimestampMs;
}

/** A kafkajs message's fields as a SourceRecord holds them; headers are converted on each read. */
export const KAFKA_RECORD_READER: RecordReader<KafkaMessage> = Object.freeze({
  key: (message: KafkaMessage) => message.key ?? null,
  value: (message: KafkaMessage) => message.value ?? null,
  headers: (message: KafkaMessage) => fromKafkaHeaders(message.headers),
  offset: (message: KafkaMessage) => message.offset,
  timestampMs: (message: KafkaMessage) => timestampMsOf(message.timestamp),
});

export function toSourceRecord(message: KafkaMessage): SourceRecord {
  const reader = KAFKA_RECORD_READER;
  return {
    key: reader.key(message),
    value: reader.value(message),
    headers: reader.headers(message),
    offset: reader.offset(message),
    timestampMs: reader.timestampMs(message),
  };
}

/**
 * One fetched batch of one partition as the Source port hands it over: the kafkajs messages
 * themselves (`native`), and SourceRecords made from them only if a handler other than the
 * runtime's job reads `records`.
 */
export class KafkaSourceBatch implements SourceBatch {
  readonly native: NativeRecords<KafkaMessage>;
  private converted: readonly SourceRecord[] | null = null;

  constructor(
    readonly stream: string,
    readonly partition: number,
    messages: readonly KafkaMessage[],
  ) {
    this.native = { items: messages, reader: KAFKA_RECORD_READER };
  }

  get records(): readonly SourceRecord[] {
    this.converted ??= this.native.items.map(toSourceRecord);
    return this.converted;
  }

  get firstOffset(): string | undefined {
    return this.native.items[0]?.offset;
  }

  get lastOffset(): string | undefined {
    return this.native.items[this.native.items.length - 1]?.offset;
  }

  /** The oldest event time among its records (they need not be in time order), epoch ms. */
  oldestEventTimeMs(): number {
    let oldest = Number.POSITIVE_INFINITY;
    for (const message of this.native.items) {
      const t = timestampMsOf(message.timestamp);
      if (t < oldest) oldest = t;
    }
    return oldest;
  }
}
