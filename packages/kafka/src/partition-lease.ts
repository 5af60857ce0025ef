import type { PartitionRef } from "@sluice/runtime";
import type { KafkaSourceBatch } from "./kafka-record-reader.ts";

/**
 * One stretch of ownership of a partition: from the group join that assigned it to the join (or
 * stop) that took it away. A partition assigned again later gets a new lease, so a handler of an
 * old lease can never commit or rewind on behalf of the new one.
 */
export class PartitionLease {
  private readonly controller = new AbortController();
  /**
   * Where the next accepted batch starts: after the last batch handed over, or the rewind target.
   * Undefined until the first batch, when kafkajs reads from the group's committed offset.
   */
  nextOffset: string | undefined;
  /**
   * Where a rewind goes back to: the last offset this lease asked to commit (its outputs were
   * acknowledged, whether or not the commit has reached the broker yet), or the first offset this
   * lease read (the group's committed offset, or the earliest one for a new group; records between
   * that and the first delivered one do not exist or are not deliverable).
   */
  committedOffset: string | undefined;
  /** The last offset the broker acknowledged for this lease. */
  durableOffset: string | undefined;
  rewindRequested = false;
  /**
   * delivery "exactly_once": the partition's transactional id is being taken over; nothing is
   * accepted until then, because only afterwards is the group's committed offset final.
   */
  claiming = false;
  /**
   * Watermark alignment holds the partition (docs/design.md §12): it is paused and stays paused, whatever
   * the read window says, until the job's gate lets it read again.
   */
  heldByAlignment = false;
  private stillMember = false;

  constructor(
    readonly stream: string,
    readonly topic: string,
    readonly partition: number,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get active(): boolean {
    return !this.controller.signal.aborted;
  }

  get ref(): PartitionRef {
    return { stream: this.stream, partition: this.partition };
  }

  /**
   * Ends the lease. `stillMember`: this consumer still owns the partition until it leaves the group
   * (close()), so offsets already asked for may still be committed; a rebalance or a stopped
   * consumer gives the partition to someone else at once.
   */
  revoke(reason: Error, { stillMember = false }: { stillMember?: boolean } = {}): void {
    this.stillMember = stillMember;
    this.controller.abort(reason);
  }

  /** The group moved on while this member was leaving (a join during close): the partition may be someone else's now. */
  endMembership(): void {
    this.stillMember = false;
  }

  /** Offsets asked for through this lease may be sent to the broker. */
  get commitAllowed(): boolean {
    return this.active || this.stillMember;
  }
}

export interface QueuedBatch {
  readonly lease: PartitionLease;
  readonly batch: KafkaSourceBatch;
  /** The oldest event time among its records (they need not be in time order), epoch ms. */
  readonly oldestEventTimeMs: number;
}

/**
 * Per topic-partition state that outlives leases: the batches waiting for the handler, whether a
 * handler runs now, and whether kafkajs is told not to fetch it. At most one handler per
 * partition runs at a time, across leases too.
 */
export class PartitionSlot {
  lease: PartitionLease | null = null;
  readonly pending: QueuedBatch[] = [];
  inFlight = false;
  draining = false;
  /** Settles when the running drain loop ends; close() waits for it. */
  drained: Promise<void> = Promise.resolve();

  constructor(
    readonly topic: string,
    readonly partition: number,
  ) {}

  /** Batches handed over but not yet finished, counting the one in flight. */
  get buffered(): number {
    return this.pending.length + (this.inFlight ? 1 : 0);
  }

  /** The oldest event time of the batches waiting for `lease`'s handler; undefined when none wait. */
  oldestPendingEventTimeMs(lease: PartitionLease): number | undefined {
    let oldest: number | undefined;
    for (const item of this.pending) {
      if (item.lease === lease && (oldest === undefined || item.oldestEventTimeMs < oldest)) oldest = item.oldestEventTimeMs;
    }
    return oldest;
  }

  dropPending(): void {
    this.pending.length = 0;
  }
}

export function slotKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}
