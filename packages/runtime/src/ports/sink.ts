/** The output port: records a computation emits, sent to their stream and acknowledged. */

export interface SinkRecord {
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
  readonly headers?: Readonly<Record<string, Uint8Array>>;
  /** Explicit partition; otherwise chosen by key (or spread when there is no key). */
  readonly partition?: number;
  readonly timestampMs?: number;
}

export interface Sink {
  /** Resolves once every record is acknowledged by the log (Kafka: acks=all). */
  send(stream: string, records: readonly SinkRecord[]): Promise<void>;
  close(): Promise<void>;
}
