import { ClassScheduler, DEFAULT_CLASS } from "./class-scheduler.ts";
import { ClassQueues } from "./class-queue.ts";
import { DeadlineTimers } from "./deadline-timers.ts";
import { EmptyQueueArrival } from "./empty-queue-arrival.ts";
import { PaceCursor } from "./pace-cursor.ts";
import { paceConfigOf, type QuotaBucketConfig } from "./quota-bucket-config.ts";
import { newQuotaBucketCounters, type QuotaBucketCounters } from "./quota-bucket-snapshot.ts";
import type { Entry } from "./quota-entry.ts";
import { RememberedGrants, type GrantMemory } from "./remembered-grants.ts";
import { unitSourceOf, type UnitSource } from "./unit-source.ts";
import { WaitHistogram } from "./wait-histogram.ts";

/**
 * What a QuotaBucket holds — its units, pace, class queues, the requests it knows by id, their
 * timers and its counters — and the bookkeeping of a request entering and leaving the queue. The
 * operations on it (submit, poll, detach, release, ...) are QuotaBucket's (quota-bucket.ts).
 */
export abstract class QuotaBucketState {
  readonly id: string;
  protected config: QuotaBucketConfig;
  /** What grants are made from: a token bucket (rate) or units in use (concurrency). */
  protected tokens: UnitSource;
  /** Present while the throttler is smooth: grants are slots on its timeline, not bursts. */
  protected pacer: PaceCursor | null;
  protected readonly scheduler: ClassScheduler;
  protected readonly classes: ClassQueues;
  /** Requests known by id (queued or detached); changed only through holdEntry and dropEntry. */
  protected readonly entries = new Map<string, Entry>();
  /**
   * `entries.size`, kept beside the bucket's other fields: most requests find nothing held, and a
   * bucket among thousands answers that without reading the map (two more objects out of cache).
   */
  protected entriesHeld = 0;
  /** Detached entries in detach order, so the oldest goes first when too many pile up. */
  protected readonly detached = new Map<string, Entry>();
  /**
   * Granted request ids, answered again (not granted again) when a retry comes within the grace: the
   * bucket's own, or a keyed throttler's key's view of the memory all its keys share.
   */
  protected readonly completed: GrantMemory;
  protected readonly timers = new DeadlineTimers();
  protected readonly waitTime = new WaitHistogram();
  protected readonly counters: QuotaBucketCounters = newQuotaBucketCounters();
  protected pendingRequests = 0;
  protected readonly arrival = new EmptyQueueArrival();
  protected seq = 0;

  constructor(id: string, config: QuotaBucketConfig, now: number, grants: GrantMemory = new RememberedGrants()) {
    this.id = id;
    this.completed = grants;
    this.config = config;
    this.tokens = unitSourceOf(config, now);
    // A new bucket cannot know whether a predecessor's clients still hold slots: it starts one reach ahead.
    this.pacer = config.smooth ? new PaceCursor(paceConfigOf(config), now) : null;
    this.scheduler = new ClassScheduler(config.classWeights);
    this.classes = new ClassQueues(this.scheduler);
    this.classes.ensure([DEFAULT_CLASS, ...Object.keys(config.classWeights)]);
  }

  protected enqueue(entry: Entry): void {
    this.pendingRequests += 1;
    this.classes.add(entry);
  }

  /** Takes a queued entry out of the pending counts and refunds what it was granted. */
  protected unqueue(entry: Entry, now: number): void {
    this.arrival.clear(entry);
    const queue = this.classes.get(entry.classId);
    queue.pendingRequests -= 1;
    queue.pendingAmount -= entry.remaining;
    this.pendingRequests -= 1;
    if (entry.granted > 0) {
      this.tokens.release(entry.granted, now);
      this.scheduler.chargeVirtualTime(entry.classId, -entry.chargedVirtualTime);
      queue.refunded += entry.granted;
      this.counters.refunded += entry.granted;
    }
    entry.granted = 0;
    entry.chargedVirtualTime = 0;
  }

  protected reattach(entry: Entry, deadlineAt: number | null): void {
    this.detached.delete(entry.id);
    entry.state = "queued";
    entry.detachedUntil = null;
    entry.deadlineAt = deadlineAt;
    if (!this.scheduler.has(entry.classId)) {
      // Its class was retired and removed while it was away: it continues in `default`.
      entry.classId = DEFAULT_CLASS;
      entry.inHeap = false;
    }
    this.counters.reattached += 1;
    this.enqueue(entry);
    this.timers.armDeadline(entry);
  }

  protected forget(entry: Entry): void {
    entry.state = "done";
    this.dropEntry(entry.id);
    this.detached.delete(entry.id);
  }

  protected holdEntry(entry: Entry): void {
    this.entries.set(entry.id, entry);
    this.entriesHeld = this.entries.size;
  }

  protected dropEntry(id: string): void {
    this.entries.delete(id);
    this.entriesHeld = this.entries.size;
  }

  /** Detached entries are bounded like the queue: past `maxQueueSize`, the oldest lose their place. */
  protected boundDetached(): void {
    for (const entry of this.detached.values()) {
      if (this.detached.size <= this.config.maxQueueSize) return;
      this.forget(entry);
    }
  }
}
