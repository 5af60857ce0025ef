import type { SinkRecord } from "../ports/sink.ts";
import type { BatchHandler, BatchTransaction, PartitionRef, Source, SourceListener } from "../ports/source.ts";
import type { MemoryLog } from "./memory-log.ts";

/**
 * A Source over the memory log for one consumer group. It owns every partition of its input
 * streams (embedded mode has one worker) and delivers each partition from its committed offset.
 */
export class MemorySource implements Source {
  private readonly stop = new AbortController();
  private loops: Promise<void>[] = [];

  constructor(
    private readonly log: MemoryLog,
    private readonly group: string,
    private readonly streams: readonly string[],
    private readonly readBatchSize = 1000,
  ) {}

  async start(handler: BatchHandler, listener?: SourceListener): Promise<void> {
    if (this.loops.length > 0) return;
    const partitions: PartitionRef[] = this.streams.flatMap((stream) =>
      Array.from({ length: this.log.partitionCount(stream) }, (_, partition) => ({ stream, partition })),
    );
    listener?.onAssigned?.(partitions);
    this.loops = partitions.map((ref) => this.deliver(ref, handler));
  }

  async close(): Promise<void> {
    this.stop.abort(new Error("source closed"));
    await Promise.all(this.loops);
  }

  private async deliver({ stream, partition }: PartitionRef, handler: BatchHandler): Promise<void> {
    const signal = this.stop.signal;
    let position = this.log.committedOffset(this.group, stream, partition);
    while (!signal.aborted) {
      const records = this.log.read(stream, partition, position, this.readBatchSize);
      if (records.length === 0) {
        await this.log.waitForRecord(stream, partition, position, signal);
        continue;
      }
      let rewind = false;
      await handler(
        { stream, partition, records },
        {
          signal,
          commit: async (nextOffset) => this.log.commit(this.group, stream, partition, BigInt(nextOffset)),
          rewind: () => {
            rewind = true;
          },
          beginTransaction: async () => this.transaction(stream, partition),
        },
      );
      position = rewind ? this.log.committedOffset(this.group, stream, partition) : BigInt(records[records.length - 1]?.offset ?? position) + 1n;
      // Let other partitions' loops and timers run between batches of a busy partition.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * delivery "exactly_once" on the memory log: sends are held back and appended, with the offset
   * commit, in one synchronous step, which nothing in this single process can observe half-done.
   */
  private transaction(stream: string, partition: number): BatchTransaction {
    const held: { stream: string; records: readonly SinkRecord[] }[] = [];
    return {
      send: async (output, records) => void held.push({ stream: output, records }),
      commit: async (nextOffset) => {
        for (const { stream: output, records } of held.splice(0)) for (const record of records) this.log.append(output, record);
        this.log.commit(this.group, stream, partition, BigInt(nextOffset));
      },
      abort: async () => void held.splice(0),
    };
  }
}
