// The per-partition delivery loop of a KafkaSource: accepts kafkajs's batches into a partition's
// queue, drains that queue through the handler one call at a time, then settles the partition
// (rewind, resume or stay paused); with delivery "exactly_once" it claims the partition's
// transactional id first. Apart from KafkaSource, which owns the group membership, so that the
// ordering rules of one partition read in one place.
import type { EachBatchPayload } from "kafkajs";
import type { BatchContext, BatchHandler } from "@sluice/runtime";
import { revokedCommitError, type CommitCoalescer } from "./commit-coalescer.ts";
import { toSourceRecord } from "./kafka-consumer-helpers.ts";
import { KafkaIoError, describeError, isKafkaIoError } from "./kafka-io-error.ts";
import { isValidOffset, offsetAfter, offsetLessThan } from "./offset.ts";
import type { PartitionTransactions } from "./partition-transactions.ts";
import type { PartitionLease, PartitionSlot, QueuedBatch } from "./partition-lease.ts";

/** How the loop moves a partition's consumer position; KafkaSource's consumer does it. */
export interface PartitionMoves {
  pause(slot: PartitionSlot): void;
  resume(slot: PartitionSlot): void;
  seek(slot: PartitionSlot, offset: string): void;
}

export interface PartitionDeliveryOptions {
  readonly groupId: string;
  /** Batches queued beyond the one in flight before the partition is paused. */
  readonly prefetchBatchesPerPartition: number;
  /** delivery "exactly_once" only: one transactional producer per owned partition. */
  readonly transactions: PartitionTransactions | null;
  readonly commits: CommitCoalescer;
  /** The handler given to KafkaSource.start (null before it). */
  readonly handler: () => BatchHandler | null;
  readonly onError: (error: KafkaIoError) => void;
  readonly moves: PartitionMoves;
}

export class PartitionDelivery {
  constructor(private readonly options: PartitionDeliveryOptions) {}

  /** Queues a batch kafkajs fetched for an active lease (or pauses the partition if it cannot take it). */
  accept(slot: PartitionSlot, lease: PartitionLease, { batch, resolveOffset }: Pick<EachBatchPayload, "batch" | "resolveOffset">): void {
    const { prefetchBatchesPerPartition, moves } = this.options;
    if (lease.claiming || lease.rewindRequested || slot.buffered > prefetchBatchesPerPartition) {
      // Not accepted: no resolveOffset, and the partition is repositioned when it is resumed.
      moves.pause(slot);
      return;
    }
    const from = lease.nextOffset;
    // After a rejoin kafkajs may read a retained partition again from the committed offset; what
    // this lease already handed over is not handed over twice.
    const head = batch.messages[0];
    const messages = from === undefined || head === undefined || !offsetLessThan(head.offset, from) ? batch.messages : batch.messages.filter((m) => !offsetLessThan(m.offset, from));
    const lastOffset = batch.lastOffset();
    const first = messages[0];
    if (lease.committedOffset === undefined && first) lease.committedOffset = first.offset;
    const after = offsetAfter(lastOffset);
    if (from === undefined || offsetLessThan(from, after)) lease.nextOffset = after;
    resolveOffset(lastOffset);
    if (messages.length === 0) return;
    const records = messages.map(toSourceRecord);
    const oldestEventTimeMs = records.reduce((oldest, r) => (r.timestampMs < oldest ? r.timestampMs : oldest), Number.POSITIVE_INFINITY);
    slot.pending.push({ lease, batch: { stream: lease.stream, partition: lease.partition, records }, oldestEventTimeMs });
    if (slot.buffered > prefetchBatchesPerPartition) moves.pause(slot);
    this.drain(slot);
  }

  /**
   * delivery "exactly_once": takes the partition's transactional id over (the previous owner is
   * fenced and its open transaction aborted), then reads from the offset of the last committed
   * transaction. Until then the partition stays paused and nothing is accepted.
   */
  async claim(slot: PartitionSlot, lease: PartitionLease): Promise<void> {
    const transactions = this.options.transactions;
    if (!transactions) return;
    try {
      const from = await transactions.claim(lease);
      if (!lease.active || slot.lease !== lease) return;
      lease.claiming = false;
      slot.dropPending();
      lease.nextOffset = from;
      lease.committedOffset = from;
      this.options.moves.seek(slot, from);
      this.settle(slot);
    } catch (error) {
      if (!lease.active) return;
      // Not owned usefully without the id: stay paused; the next rebalance (or restart) claims again.
      this.options.onError(isKafkaIoError(error) ? error : new KafkaIoError("TRANSACTION_FAILED", describeError(error), { groupId: this.options.groupId }, { cause: error }));
    }
  }

  private drain(slot: PartitionSlot): void {
    if (slot.draining) return;
    slot.draining = true;
    slot.drained = (async () => {
      try {
        for (let item = slot.pending.shift(); item; item = slot.pending.shift()) {
          if (item.lease !== slot.lease || !item.lease.active) continue;
          slot.inFlight = true;
          try {
            await this.deliver(slot, item);
          } finally {
            slot.inFlight = false;
          }
          this.settle(slot);
        }
      } finally {
        slot.draining = false;
      }
      this.settle(slot);
    })();
  }

  private async deliver(slot: PartitionSlot, { lease, batch }: QueuedBatch): Promise<void> {
    const handler = this.options.handler();
    if (!handler) return;
    const { transactions, groupId } = this.options;
    const context: BatchContext = {
      signal: lease.signal,
      commit: (nextOffset) => this.commit(lease, nextOffset),
      rewind: () => this.requestRewind(slot, lease),
      readAheadOldestMs: () => slot.oldestPendingEventTimeMs(lease),
      hold: (held) => this.hold(slot, lease, held),
      ...(transactions ? { beginTransaction: () => transactions.begin(lease) } : {}),
    };
    try {
      await handler(batch, context);
    } catch (error) {
      const first = batch.records[0]?.offset;
      const last = batch.records[batch.records.length - 1]?.offset;
      this.options.onError(
        new KafkaIoError(
          "HANDLER_FAILED",
          `the handler of group "${groupId}" threw on stream "${lease.stream}" partition ${lease.partition} ` +
            `(offsets ${first}..${last}): ${describeError(error)}; the partition goes back to offset ${lease.committedOffset}`,
          { groupId, stream: lease.stream, partition: lease.partition, firstOffset: first, lastOffset: last },
          { cause: error },
        ),
      );
      this.requestRewind(slot, lease);
    }
  }

  /** After a handler returned, or its loop ended: rewind, resume, or leave paused. */
  private settle(slot: PartitionSlot): void {
    const lease = slot.lease;
    if (!lease || !lease.active || slot.inFlight || lease.claiming) return;
    const { moves } = this.options;
    if (lease.rewindRequested) {
      lease.rewindRequested = false;
      slot.dropPending();
      lease.nextOffset = lease.committedOffset;
      if (lease.committedOffset !== undefined) moves.seek(slot, lease.committedOffset);
      moves.resume(slot);
      return;
    }
    if (slot.buffered <= this.options.prefetchBatchesPerPartition && !lease.heldByAlignment) moves.resume(slot);
  }

  /**
   * Watermark alignment paused the partition (kafkajs fetches nothing more for it), or let it read
   * again: it resumes only if the read window and the lease allow it too.
   */
  private hold(slot: PartitionSlot, lease: PartitionLease, held: boolean): void {
    if (!lease.active || slot.lease !== lease || lease.heldByAlignment === held) return;
    lease.heldByAlignment = held;
    const { moves, prefetchBatchesPerPartition } = this.options;
    if (held) moves.pause(slot);
    else if (!lease.claiming && !lease.rewindRequested && slot.buffered <= prefetchBatchesPerPartition) moves.resume(slot);
  }

  private requestRewind(slot: PartitionSlot, lease: PartitionLease): void {
    if (!lease.active || slot.lease !== lease) return;
    lease.rewindRequested = true;
    slot.dropPending();
    this.options.moves.pause(slot);
  }

  /** Validates and records the offset; the coalescer sends it (merged with others) and settles the promise. */
  private commit(lease: PartitionLease, nextOffset: string): Promise<void> {
    const { groupId } = this.options;
    if (typeof nextOffset !== "string" || !isValidOffset(nextOffset)) {
      const where = `stream "${lease.stream}" (topic "${lease.topic}") partition ${lease.partition} in group "${groupId}"`;
      return Promise.reject(
        new KafkaIoError("COMMIT_FAILED", `commit of ${JSON.stringify(nextOffset)} for ${where}: an offset is a decimal integer string ≥ 0`, {
          groupId,
          offset: nextOffset,
        }),
      );
    }
    if (!lease.active) return Promise.reject(revokedCommitError(groupId, lease, nextOffset));
    if (lease.committedOffset === undefined || offsetLessThan(lease.committedOffset, nextOffset)) lease.committedOffset = nextOffset;
    return this.options.commits.request(lease, nextOffset);
  }
}
