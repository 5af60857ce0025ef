import { KafkaIoError, describeError } from "./kafka-io-error.ts";
import { offsetLessThan } from "./offset.ts";
import { slotKey, type PartitionLease } from "./partition-lease.ts";

export interface CommitCoalescerOptions {
  readonly groupId: string;
  /** Sends one OffsetCommit for many partitions (kafkajs `consumer.commitOffsets`). */
  readonly send: (offsets: { topic: string; partition: number; offset: string }[]) => Promise<void>;
  /** True for the broker answers that mean the group is rebalancing (the commit is retried after the join). */
  readonly isGroupChange: (error: unknown) => boolean;
  /** Waits for the next group join; rejects when there will be none (closed, crashed, timed out). */
  readonly waitForJoin: () => Promise<void>;
  /** How many group joins this consumer has seen: a join between a send and its failure needs no wait. */
  readonly joins: () => number;
  /** Shortest time between two OffsetCommit requests; requests in between are merged. */
  readonly intervalMs: number;
  readonly maxAttempts: number;
}

interface PendingCommit {
  readonly lease: PartitionLease;
  offset: string;
  attempts: number;
  readonly waiters: { resolve(): void; reject(error: Error): void }[];
}

/**
 * Offset commits of one consumer, made asynchronous and merged. A job asks for a commit after
 * every iteration; waiting for each one (a broker round trip per `max_rows_per_batch` rows per
 * partition) capped a partition at a few thousand rows per second. Here a request only records the
 * partition's newest offset; one OffsetCommit at a time carries the newest offset of every
 * partition, at most one per `intervalMs`. Each request's promise settles with the commit that
 * carried its offset or a later one, so a caller that does wait learns when it is durable.
 *
 * At-least-once is unchanged: an offset is asked for only after the outputs before it were
 * acknowledged. What a crash can repeat grows by at most one interval plus one round trip of work.
 * Offsets of a lease that was revoked by a rebalance are refused (the next owner may be past them);
 * those of a lease revoked by close() are still sent, since this member owns the partition until
 * it leaves the group.
 */
export class CommitCoalescer {
  private readonly pending = new Map<string, PendingCommit>();
  private flushing: Promise<void> | null = null;
  private lastSentAt = Number.NEGATIVE_INFINITY;
  /** Ends the flush loop's wait for the interval early (hurry, flush). */
  private wakeEarly: (() => void) | null = null;

  constructor(private readonly options: CommitCoalescerOptions) {}

  /** Records `offset` (already validated) as the partition's position to commit; settles once it (or a later one) is durable. */
  request(lease: PartitionLease, offset: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const key = slotKey(lease.topic, lease.partition);
      let entry = this.pending.get(key);
      if (entry && entry.lease !== lease) {
        // The partition changed hands in between: the old lease's offset must not be committed.
        this.settle(entry, revokedCommitError(this.options.groupId, entry.lease, entry.offset));
        entry = undefined;
      }
      if (!entry) {
        entry = { lease, offset, attempts: 0, waiters: [] };
        this.pending.set(key, entry);
      } else if (offsetLessThan(entry.offset, offset)) {
        entry.offset = offset;
      }
      entry.waiters.push({ resolve, reject });
      this.flushing ??= this.flushLoop();
    });
  }

  /**
   * Sends what is recorded now, without waiting out the interval: the group is about to rebalance,
   * and until the new generation starts this member may still commit for what it owns.
   */
  hurry(): void {
    this.lastSentAt = Number.NEGATIVE_INFINITY;
    this.wakeEarly?.();
    if (this.pending.size > 0) this.flushing ??= this.flushLoop();
  }

  /** Sends everything recorded so far at once (close() calls it before leaving the group). */
  async flush(): Promise<void> {
    this.lastSentAt = Number.NEGATIVE_INFINITY;
    this.wakeEarly?.();
    while (this.pending.size > 0 || this.flushing) {
      this.flushing ??= this.flushLoop();
      await this.flushing;
    }
  }

  private async flushLoop(): Promise<void> {
    try {
      while (this.pending.size > 0) {
        const wait = this.lastSentAt + this.options.intervalMs - Date.now();
        if (wait > 0) await this.sleep(wait);
        await this.sendPending();
      }
    } finally {
      this.flushing = null;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        if (this.wakeEarly === wake) this.wakeEarly = null;
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.wakeEarly = wake;
    });
  }

  private async sendPending(): Promise<void> {
    const batch: PendingCommit[] = [];
    for (const [key, entry] of this.pending) {
      this.pending.delete(key);
      if (entry.lease.commitAllowed) batch.push(entry);
      else this.settle(entry, revokedCommitError(this.options.groupId, entry.lease, entry.offset));
    }
    if (batch.length === 0) return;
    this.lastSentAt = Date.now();
    const joinsAtSend = this.options.joins();
    try {
      await this.options.send(batch.map(({ lease, offset }) => ({ topic: lease.topic, partition: lease.partition, offset })));
    } catch (error) {
      await this.retryOrFail(batch, error, joinsAtSend);
      return;
    }
    for (const entry of batch) {
      entry.lease.durableOffset = entry.offset;
      this.settle(entry);
    }
  }

  /** A rebalance in progress: the commit is valid again in the next generation if the partition stays. */
  private async retryOrFail(batch: PendingCommit[], error: unknown, joinsAtSend: number): Promise<void> {
    const retry: PendingCommit[] = [];
    for (const entry of batch) {
      entry.attempts += 1;
      if (!entry.lease.commitAllowed) this.settle(entry, revokedCommitError(this.options.groupId, entry.lease, entry.offset, error));
      else if (entry.attempts < this.options.maxAttempts && this.options.isGroupChange(error)) retry.push(entry);
      else this.settle(entry, failedError(this.options.groupId, entry, error));
    }
    if (retry.length === 0) return;
    // The join that answers this rebalance may already have happened while the commit was on its way.
    const joined =
      this.options.joins() > joinsAtSend ||
      (await this.options.waitForJoin().then(
        () => true,
        () => false,
      ));
    for (const entry of retry) {
      // No join to confirm that this member still owns the partition (closing, crashed, timed out):
      // sending again could land in a generation where it belongs to someone else.
      if (joined) this.requeue(entry);
      else this.settle(entry, failedError(this.options.groupId, entry, error));
    }
  }

  /** Puts a retried entry back, merged with whatever the same lease asked for meanwhile. */
  private requeue(entry: PendingCommit): void {
    const key = slotKey(entry.lease.topic, entry.lease.partition);
    const newer = this.pending.get(key);
    if (!newer) {
      this.pending.set(key, entry);
      return;
    }
    if (newer.lease !== entry.lease) {
      this.settle(entry, revokedCommitError(this.options.groupId, entry.lease, entry.offset));
      return;
    }
    if (offsetLessThan(newer.offset, entry.offset)) newer.offset = entry.offset;
    newer.attempts = Math.max(newer.attempts, entry.attempts);
    newer.waiters.push(...entry.waiters);
  }

  private settle(entry: PendingCommit, error?: Error): void {
    for (const waiter of entry.waiters.splice(0)) {
      if (error) waiter.reject(error);
      else waiter.resolve();
    }
  }
}

function where(groupId: string, lease: PartitionLease): string {
  return `stream "${lease.stream}" (topic "${lease.topic}") partition ${lease.partition} in group "${groupId}"`;
}

/** A commit refused because the lease ended: the partition's next owner resumes from the last durable commit. */
export function revokedCommitError(groupId: string, lease: PartitionLease, offset: string, cause?: unknown): KafkaIoError {
  const reason: unknown = lease.signal.reason;
  const why = reason instanceof KafkaIoError ? reason.text : reason instanceof Error ? reason.message : "the partition was revoked";
  return new KafkaIoError(
    "PARTITION_REVOKED",
    `commit of offset ${offset} for ${where(groupId, lease)} refused: ${why}`,
    { groupId, stream: lease.stream, topic: lease.topic, partition: lease.partition, offset },
    { cause: cause ?? reason },
  );
}

function failedError(groupId: string, { lease, offset, attempts }: PendingCommit, cause: unknown): KafkaIoError {
  return new KafkaIoError(
    "COMMIT_FAILED",
    `commit of offset ${offset} for ${where(groupId, lease)} failed after ${attempts} attempt(s): ${describeError(cause)}; the next commit of the partition carries a later offset`,
    { groupId, stream: lease.stream, topic: lease.topic, partition: lease.partition, offset },
    { cause },
  );
}
