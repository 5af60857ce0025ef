// The per-partition delivery loop of a KafkaSource: accepts kafkajs's batches into a partition's
// queue, drains that queue through the handler one call at a time, then settles the partition
// (rewind, resume or stay paused); with delivery "exactly_once" it claims the partition's
// transactional id first. Apart from KafkaSource, which owns the group membership, so that the
// ordering rules of one partition read in one place.
import type { EachBatchPayload } from "kafkajs";
import type { BatchContext, BatchHandler } from "@sluice/runtime";
import { revokedCommitError, type CommitCoalescer } from "./commit-coalescer.ts";
import { KafkaSourceBatch } from "./kafka-record-reader.ts";
import { KafkaIoError, describeError, isKafkaIoError } from "./kafka-io-error.ts";
import { isValidOffset, offsetAfter, offsetLessThan } from "./offset.ts";
import type { PartitionTransactions } from "./partition-transactions.ts";
import type { PartitionLease, PartitionSlot, QueuedBatch } from "./partition-lease.ts";

/** A failed claim is tried again after this long, doubling up to the maximum. */
const CLAIM_RETRY_MIN_MS = 500;
const CLAIM_RETRY_MAX_MS = 10_000;

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

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
  /**
   * delivery "exactly_once": how long a lease whose producer was fenced waits before it claims the
   * partition back. A rebalance that gave the partition to another member reaches this one within
   * about a session timeout and ends the lease; a lease still here after that missed no rebalance
   * that matters (it may have missed a whole generation during a broker outage, kafkajs has no
   * KIP-447 generation fencing), and only a new claim lets it go on.
   */
  readonly fencedReclaimDelayMs: number;
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
    const messages =
      from === undefined || head === undefined || !offsetLessThan(head.offset, from)
        ? batch.messages
        : batch.messages.filter((m) => !offsetLessThan(m.offset, from));
    const lastOffset = batch.lastOffset();
    const first = messages[0];
    if (lease.committedOffset === undefined && first) lease.committedOffset = first.offset;
    const after = offsetAfter(lastOffset);
    if (from === undefined || offsetLessThan(from, after)) lease.nextOffset = after;
    resolveOffset(lastOffset);
    if (messages.length === 0) return;
    // kafkajs's messages as they are: the job reads each one once, in its iteration (KafkaSourceBatch).
    const handed = new KafkaSourceBatch(lease.stream, lease.partition, messages);
    slot.pending.push({ lease, batch: handed, oldestEventTimeMs: handed.oldestEventTimeMs() });
    if (slot.buffered > prefetchBatchesPerPartition) moves.pause(slot);
    this.drain(slot);
  }

  /**
   * delivery "exactly_once": takes the partition's transactional id over (the previous owner is
   * fenced and its open transaction aborted), then reads from the offset of the last committed
   * transaction. Until then the partition stays paused and nothing is accepted. A claim that fails
   * (the broker is down longer than the claim's own retries) is tried again while the lease lasts,
   * so a broker outage never leaves a partition paused for good.
   */
  async claim(slot: PartitionSlot, lease: PartitionLease): Promise<void> {
    const transactions = this.options.transactions;
    if (!transactions) return;
    for (let attempt = 1; lease.active && slot.lease === lease; attempt++) {
      try {
        const from = await transactions.claim(lease);
        if (!lease.active || slot.lease !== lease) return;
        lease.claiming = false;
        slot.dropPending();
        lease.nextOffset = from;
        lease.committedOffset = from;
        this.options.moves.seek(slot, from);
        this.settle(slot);
        return;
      } catch (error) {
        if (!lease.active) return;
        const retryMs = Math.min(CLAIM_RETRY_MAX_MS, CLAIM_RETRY_MIN_MS * 2 ** (attempt - 1));
        const reason = isKafkaIoError(error) ? error.message : describeError(error);
        this.options.onError(
          new KafkaIoError(
            "TRANSACTION_FAILED",
            `${reason}; partition ${lease.partition} of topic "${lease.topic}" stays paused and is claimed again in ${retryMs} ms`,
            {
              groupId: this.options.groupId,
              topic: lease.topic,
              partition: lease.partition,
              attempt,
            },
            { cause: error },
          ),
        );
        await abortableSleep(retryMs, lease.signal);
      }
    }
  }

  /**
   * A transaction failed with its outcome unknown (PartitionTransactions.needsReclaim): what the
   * job would rewind to may be behind a commit that still completes, so the partition is claimed
   * again and read from the offset the broker reports once the claim settled that transaction.
   */
  private reclaim(slot: PartitionSlot, lease: PartitionLease, delayMs: number): void {
    lease.claiming = true;
    lease.rewindRequested = false;
    slot.dropPending();
    this.options.moves.pause(slot);
    void (async () => {
      if (delayMs > 0) await abortableSleep(delayMs, lease.signal);
      await this.claim(slot, lease);
    })();
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
      const first = batch.firstOffset;
      const last = batch.lastOffset;
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
    const transactions = this.options.transactions;
    if (transactions?.needsReclaim(lease)) {
      this.reclaim(slot, lease, 0);
      return;
    }
    if (transactions?.isFenced(lease)) {
      this.reclaim(slot, lease, this.options.fencedReclaimDelayMs);
      return;
    }
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
