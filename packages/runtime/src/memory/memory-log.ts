import type { SinkRecord } from "../ports/sink.ts";
import type { SourceRecord } from "../ports/source.ts";
import { NO_RECORD_HEADERS } from "../io/source-record-reader.ts";

interface Partition {
  readonly records: SourceRecord[];
  /** Readers waiting for the next append. */
  waiters: (() => void)[];
}

/**
 * An in-memory partitioned log: streams of embedded mode and fast tests. Keyed records go to
 * partition hash(key) mod n, keyless ones round-robin; offsets count from 0 per partition.
 * Committed offsets are kept per consumer group, like Kafka's.
 */
export class MemoryLog {
  private readonly streams = new Map<string, Partition[]>();
  private readonly committed = new Map<string, Map<string, bigint>>();
  private roundRobin = 0;

  constructor(
    partitionsByStream: Readonly<Record<string, number>>,
    private readonly now: () => number = Date.now,
  ) {
    for (const [stream, count] of Object.entries(partitionsByStream)) {
      this.streams.set(
        stream,
        Array.from({ length: count }, () => ({ records: [], waiters: [] })),
      );
    }
  }

  partitionCount(stream: string): number {
    return this.partitionsOf(stream).length;
  }

  append(stream: string, record: SinkRecord): { partition: number; offset: string } {
    const partitions = this.partitionsOf(stream);
    const index = record.partition ?? (record.key ? hashBytes(record.key) % partitions.length : this.roundRobin++ % partitions.length);
    const partition = partitions[index];
    if (!partition) throw new RangeError(`stream "${stream}" has ${partitions.length} partitions; partition ${index} does not exist`);
    const offset = String(partition.records.length);
    partition.records.push({
      key: record.key,
      value: record.value,
      headers: record.headers ?? NO_RECORD_HEADERS,
      offset,
      timestampMs: record.timestampMs ?? this.now(),
    });
    const waiters = partition.waiters;
    partition.waiters = [];
    for (const wake of waiters) wake();
    return { partition: index, offset };
  }

  /** Up to `max` records from `offset` on. */
  read(stream: string, partition: number, offset: bigint, max: number): SourceRecord[] {
    const records = this.partitionsOf(stream)[partition]?.records ?? [];
    const start = Number(offset);
    return records.slice(start, start + max);
  }

  endOffset(stream: string, partition: number): bigint {
    return BigInt(this.partitionsOf(stream)[partition]?.records.length ?? 0);
  }

  /** Resolves when the partition holds a record at `offset`, or the signal aborts. */
  waitForRecord(stream: string, partition: number, offset: bigint, signal: AbortSignal): Promise<void> {
    const target = this.partitionsOf(stream)[partition];
    if (!target || offset < BigInt(target.records.length) || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener("abort", done);
        resolve();
      };
      target.waiters.push(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  commit(group: string, stream: string, partition: number, nextOffset: bigint): void {
    let offsets = this.committed.get(group);
    if (!offsets) {
      offsets = new Map();
      this.committed.set(group, offsets);
    }
    offsets.set(`${stream}/${partition}`, nextOffset);
  }

  committedOffset(group: string, stream: string, partition: number): bigint {
    return this.committed.get(group)?.get(`${stream}/${partition}`) ?? 0n;
  }

  /** Every record of a stream, partition by partition (tests and examples). */
  records(stream: string): SourceRecord[][] {
    return this.partitionsOf(stream).map((p) => [...p.records]);
  }

  private partitionsOf(stream: string): Partition[] {
    const partitions = this.streams.get(stream);
    if (!partitions) throw new RangeError(`the memory log has no stream "${stream}" (streams: ${[...this.streams.keys()].join(", ")})`);
    return partitions;
  }
}

/** FNV-1a over the key bytes: stable across runs, so a key always lands in the same partition. */
function hashBytes(bytes: Uint8Array): number {
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}
