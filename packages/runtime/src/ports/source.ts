/**
 * The input port of the runtime. A Source delivers batches of raw records per (stream, partition)
 * of one computation; the runtime decodes, throttles, processes, outputs and commits them.
 * Implementations: the in-memory partitioned log (embedded mode, tests) and Kafka (@sluice/kafka).
 */
import type { SinkRecord } from "./sink.ts";

export interface SourceRecord {
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
  readonly headers: Readonly<Record<string, Uint8Array>>;
  /** Position in the partition, as a decimal string (Kafka offsets are 64-bit). */
  readonly offset: string;
  /** Event timestamp (Kafka's message timestamp), epoch ms. */
  readonly timestampMs: number;
}

/**
 * Reads the fields of a source's own record objects as a SourceRecord would hold them. A source
 * that has its records in another form (kafkajs's messages) hands them over with a reader instead
 * of one SourceRecord each: the job reads them straight into the computation's messages, one
 * iteration at a time, so a busy consumer makes one object per record, not two, and a fetched
 * batch's records do not all carry a second object while its iterations run.
 *
 * Method syntax on purpose: it lets a reader of a concrete type stand for `RecordReader<unknown>`
 * in `NativeRecords`, whose items are always of that reader's type.
 */
export interface RecordReader<R> {
  key(record: R): Uint8Array | null;
  value(record: R): Uint8Array | null;
  headers(record: R): Readonly<Record<string, Uint8Array>>;
  offset(record: R): string;
  timestampMs(record: R): number;
}

/** A batch's records in the source's own form, and how to read them (see RecordReader). */
export interface NativeRecords<R = unknown> {
  readonly items: readonly R[];
  readonly reader: RecordReader<R>;
}

export interface SourceBatch {
  /** Stream name from the spec (not the topic). */
  readonly stream: string;
  readonly partition: number;
  /**
   * In offset order; may hold more than max_rows_per_batch: the job splits it into iterations.
   * A source that also gives `native` may build these only when they are first read.
   */
  readonly records: readonly SourceRecord[];
  /**
   * Optional: the same records, in the same order, in the source's own form with their reader.
   * The runtime reads these when present and never touches `records`.
   */
  readonly native?: NativeRecords;
}

export interface BatchContext {
  /**
   * Aborts when this partition is taken away (rebalance) or the source stops: the handler stops
   * waiting and returns without committing; another owner continues from the last commit.
   */
  readonly signal: AbortSignal;
  /**
   * Records the position after the last processed record; resolves once it (or a later position)
   * is durable. Jobs do not wait for it: a source may merge commits and send them later.
   */
  commit(nextOffset: string): Promise<void>;
  /**
   * Processing failed: the partition is delivered again from its last committed offset (after the
   * handler returns). Records past the last commit were not acknowledged, so nothing is lost.
   */
  rewind(): void;
  /**
   * The oldest event time (epoch ms) among records the source has already fetched for this
   * partition but not yet handed to the handler; undefined when it holds none. The job's lag
   * timestamp counts them as read and not processed (docs/design.md §12). Optional: a source that does not
   * fetch ahead has nothing to say.
   */
  readAheadOldestMs?(): number | undefined;
  /**
   * Watermark alignment (docs/design.md §12) holds this partition (true) or lets it read again (false): a
   * source that fetches ahead stops fetching it while held. Optional: a source that does not fetch
   * ahead is held by the job's wait alone.
   */
  hold?(held: boolean): void;
  /**
   * Opens a transaction for this partition's next iteration; only sources that can commit outputs
   * and offsets atomically have it (Kafka, the memory log).
   */
  beginTransaction?(): Promise<BatchTransaction>;
}

/**
 * One batch's outputs and its input offset, made visible together or not at all (docs/design.md §13,
 * `delivery: "exactly_once"`). At most one is open per partition at a time.
 */
export interface BatchTransaction {
  /** Adds records to the transaction; resolves once the log accepted them (still invisible to read_committed readers). */
  send(stream: string, records: readonly SinkRecord[]): Promise<void>;
  /** Adds the offset after the batch and commits: outputs and offset become visible at once. */
  commit(nextOffset: string): Promise<void>;
  /** Drops everything sent in it; never throws. */
  abort(): Promise<void>;
}

export type BatchHandler = (batch: SourceBatch, context: BatchContext) => Promise<void>;

export interface PartitionRef {
  readonly stream: string;
  readonly partition: number;
}

export interface SourceListener {
  /** The partitions this source now owns (after each assignment). */
  onAssigned?(partitions: readonly PartitionRef[]): void;
  /** Partitions taken away; the runtime stops their jobs. */
  onRevoked?(partitions: readonly PartitionRef[]): void;
}

export interface Source {
  /**
   * Starts delivering: for each partition, at most one `handler` call at a time, in offset order.
   * Resolves once delivery has started (for Kafka: the consumer joined its group).
   */
  start(handler: BatchHandler, listener?: SourceListener): Promise<void>;
  /** Stops delivering, waits for handlers in flight, leaves the group. Idempotent. */
  close(): Promise<void>;
}
