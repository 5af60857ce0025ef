import { ClassScheduler, DEFAULT_CLASS } from "./class-scheduler.ts";
import { headOf, newClassQueue, type ClassQueue } from "./class-queue.ts";
import { DeadlineTimers } from "./deadline-timers.ts";
import { effectiveLimitOf, type QuotaBucketConfig } from "./quota-bucket-config.ts";
import { checkAmount, queueFullError, timeoutError } from "./quota-bucket-errors.ts";
import {
  newQuotaBucketCounters,
  type QuotaBucketCounters,
  type QuotaBucketSnapshot,
  type QuotaClassSnapshot,
} from "./quota-bucket-snapshot.ts";
import { laterDeadline, type Entry } from "./quota-entry.ts";
import type { Admission, QuotaRequest, Settlement } from "./quota-request.ts";
import { RememberedGrants } from "./remembered-grants.ts";
import type { SluiceError } from "./sluice-error.ts";
import { TokenBucket } from "./token-bucket.ts";
import { ConcurrencyUnits } from "./concurrency-units.ts";
import { WaitHistogram } from "./wait-histogram.ts";

export { MAX_REQUEST_AMOUNT, type Admission, type QuotaRequest, type Settlement } from "./quota-request.ts";
export type { QuotaBucketCounters, QuotaBucketSnapshot, QuotaClassSnapshot } from "./quota-bucket-snapshot.ts";

/**
 * One named throttler on the controller (DESIGN §4): a token bucket shared among weighted classes by
 * start-time fair queuing, lag order inside a class, chunking, deadlines with exact refunds, and
 * idempotent request ids. A pure state machine: every input carries `now`, and outputs are returned.
 *
 * The shell around it (QuotaBucketDriver) calls `submit`, `cancel`, `detach`, `release` or
 * `reconfigure`, then `poll(now)` to collect what became due, and sleeps until `nextWakeAt(now)`.
 * There is no polling loop: nothing happens between the wake-ups the bucket asks for.
 */

/** What grants are made from: a token bucket (rate) or units in use (concurrency). */
type UnitSource = TokenBucket | ConcurrencyUnits;

function unitSourceOf(config: QuotaBucketConfig, now: number): UnitSource {
  const limit = effectiveLimitOf(config);
  return config.kind === "concurrency" ? new ConcurrencyUnits(limit) : new TokenBucket({ limit, periodMs: config.periodMs }, now);
}

export class QuotaBucket {
  readonly id: string;
  private config: QuotaBucketConfig;
  private tokens: UnitSource;
  private readonly scheduler: ClassScheduler;
  private readonly classes = new Map<string, ClassQueue>();
  private readonly entries = new Map<string, Entry>();
  /** Detached entries in detach order, so the oldest goes first when too many pile up. */
  private readonly detached = new Map<string, Entry>();
  /** Granted request ids, answered again (not granted again) when a retry comes within the grace. */
  private readonly completed = new RememberedGrants();
  private readonly timers = new DeadlineTimers();
  private readonly waitTime = new WaitHistogram();
  private readonly counters: QuotaBucketCounters = newQuotaBucketCounters();
  private pendingRequests = 0;
  private seq = 0;

  constructor(id: string, config: QuotaBucketConfig, now: number) {
    this.id = id;
    this.config = config;
    this.tokens = unitSourceOf(config, now);
    this.scheduler = new ClassScheduler(config.classWeights);
    this.ensureClassQueues();
  }

  get pending(): number {
    return this.pendingRequests;
  }

  submit(request: QuotaRequest, now: number): Admission {
    const requestId = request.requestId !== "" ? request.requestId : `~${this.seq}`;
    const amountError = this.checkAmount(request.amount, requestId);
    if (amountError) {
      this.counters.refusedInvalidAmount += 1;
      return { kind: "refused", requestId, error: amountError };
    }
    this.completed.forgetExpired(now);
    const replay = this.completed.get(requestId);
    if (replay) {
      this.counters.replayed += 1;
      return { kind: "granted", requestId, amount: replay.amount, waitedMs: replay.waitedMs };
    }
    const existing = this.entries.get(requestId);
    if (existing?.state === "queued") {
      existing.deadlineAt = laterDeadline(existing.deadlineAt, request.deadlineAt);
      this.timers.armDeadline(existing);
      this.counters.joined += 1;
      return { kind: "joined", requestId };
    }
    if (existing?.state === "detached") {
      this.reattach(existing, request.deadlineAt);
      return { kind: "reattached", requestId };
    }
    if (request.amount === 0) {
      return { kind: "granted", requestId, amount: 0, waitedMs: 0 };
    }
    if (this.pendingRequests >= this.config.maxQueueSize) {
      this.counters.refusedQueueFull += 1;
      return { kind: "refused", requestId, error: queueFullError(this.id, this.pendingRequests, this.config.maxQueueSize) };
    }
    const entry: Entry = {
      id: requestId,
      clientId: request.clientId,
      classId: this.resolveClass(request.classId),
      timestampMs: request.timestampMs,
      seq: this.seq++,
      enqueuedAt: now,
      amount: request.amount,
      remaining: request.amount,
      granted: 0,
      chargedVirtualTime: 0,
      deadlineAt: request.deadlineAt,
      detachedUntil: null,
      started: false,
      state: "queued",
      inHeap: false,
    };
    this.entries.set(requestId, entry);
    this.enqueue(entry);
    this.timers.armDeadline(entry);
    return { kind: "queued", requestId };
  }

  /** Grants what is due at `now`, detaches what passed its deadline, forgets what passed its grace. */
  poll(now: number): Settlement[] {
    const settlements: Settlement[] = [];
    this.fireTimers(now, settlements);
    this.drain(now, settlements);
    this.timers.compact(this.entries);
    return settlements;
  }

  /** When `poll` should run next, or null when nothing will become due by itself. */
  nextWakeAt(now: number): number | null {
    let wake = this.timers.nextAt();
    if (this.pendingRequests > 0) {
      const ms = this.tokens.msUntilGrantable(now);
      if (ms !== null && (wake === null || now + ms < wake)) wake = now + ms;
    }
    return wake;
  }

  /** The caller gave up: the request leaves at once and everything granted to it is refunded. */
  cancel(requestId: string, now: number): boolean {
    const entry = this.entries.get(requestId);
    if (!entry) return false;
    if (entry.state === "queued") {
      this.unqueue(entry, now);
      this.refreshClass(entry.classId);
    }
    this.detached.delete(requestId);
    this.entries.delete(requestId);
    entry.state = "done";
    this.counters.cancelled += 1;
    return true;
  }

  /**
   * The caller went away (deadline, dropped connection) but may retry: the request is refunded and
   * stops being served or blocking anyone, yet keeps its place for `detachedGraceMs`.
   */
  detach(requestId: string, now: number): boolean {
    const entry = this.entries.get(requestId);
    if (entry?.state !== "queued") return false;
    this.unqueue(entry, now);
    entry.state = "detached";
    entry.remaining = entry.amount;
    entry.detachedUntil = now + this.config.detachedGraceMs;
    this.detached.set(entry.id, entry);
    this.timers.armGrace(entry, entry.detachedUntil);
    this.refreshClass(entry.classId);
    this.boundDetached();
    return true;
  }

  /**
   * Takes quota without queueing: only while nobody waits and the balance is positive (the
   * reference's TryAcquire). Returns whether it was taken.
   */
  tryAcquire(amount: number, classId: string, now: number): boolean {
    if (this.checkAmount(amount, "")) return false;
    if (amount === 0) return true;
    if (this.pendingRequests > 0 || !this.tokens.canGrantWithoutQueue(now) || !this.tokens.canTake(amount, now)) return false;
    this.tokens.take(amount, now);
    const resolved = this.resolveClass(classId);
    this.counters.granted += amount;
    this.classQueue(resolved).granted += amount;
    return true;
  }

  /** Returns unused quota to the bucket (never above its capacity). */
  release(amount: number, classId: string, now: number): void {
    const error = this.checkAmount(amount, "");
    if (error) throw error;
    this.tokens.release(amount, now);
    this.counters.released += amount;
    const id = classId === "" ? DEFAULT_CLASS : classId;
    const queue = this.classes.get(id);
    if (queue) {
      queue.released += amount;
      this.scheduler.refund(id, amount);
    }
  }

  /**
   * Applies new limits, weights and sizes without losing accrued tokens or anyone's place. A class
   * dropped here stops accepting requests (they go to `default`) and disappears once drained.
   */
  reconfigure(config: QuotaBucketConfig, now: number): void {
    this.config = config;
    // A change of kind starts a fresh unit source: tokens and units in use mean different things.
    if (this.tokens.kind !== (config.kind ?? "rate")) this.tokens = unitSourceOf(config, now);
    else this.tokens.reconfigure({ limit: effectiveLimitOf(config), periodMs: config.periodMs }, now);
    this.scheduler.reconfigure(config.classWeights);
    this.ensureClassQueues();
    for (const id of [...this.classes.keys()]) this.refreshClass(id);
  }

  snapshot(now: number): QuotaBucketSnapshot {
    const limit = effectiveLimitOf(this.config);
    const classes = this.scheduler.views().map((view): QuotaClassSnapshot => {
      const queue = this.classQueue(view.id);
      return {
        ...view,
        pendingRequests: queue.pendingRequests,
        pendingAmount: queue.pendingAmount,
        granted: queue.granted,
        refunded: queue.refunded,
        released: queue.released,
        waitTime: queue.firstGrantWait.view(),
      };
    });
    return {
      id: this.id,
      limit,
      periodMs: this.config.periodMs,
      capacity: limit === null ? null : this.tokens.capacity,
      balance: limit === null ? null : this.tokens.balanceAt(now),
      useClassWeightsAsLimit: this.config.useClassWeightsAsLimit,
      maxGrantAmount: this.config.maxGrantAmount,
      maxQueueSize: this.config.maxQueueSize,
      pendingRequests: this.pendingRequests,
      pendingAmount: classes.reduce((sum, c) => sum + c.pendingAmount, 0),
      detachedRequests: this.detached.size,
      counters: { ...this.counters },
      waitTime: this.waitTime.view(),
      classes,
      kind: this.tokens.kind,
      inUse: this.tokens.inUse,
    };
  }

  private drain(now: number, settlements: Settlement[]): void {
    while (this.pendingRequests > 0 && this.tokens.canGrant(now)) {
      const classId = this.scheduler.select();
      if (classId === null) return;
      const queue = this.classQueue(classId);
      const entry = headOf(queue);
      if (!entry) {
        this.refreshClass(classId);
        continue;
      }
      const max = this.config.maxGrantAmount;
      const chunk = max === null ? entry.remaining : Math.min(entry.remaining, max);
      // Concurrency: the chunk at the head must fit; it keeps its place until units come back.
      if (!this.tokens.canTake(chunk, now)) return;
      this.tokens.take(chunk, now);
      entry.chargedVirtualTime += this.scheduler.charge(classId, chunk);
      entry.granted += chunk;
      entry.remaining -= chunk;
      queue.pendingAmount -= chunk;
      queue.granted += chunk;
      this.counters.granted += chunk;
      if (!entry.started) {
        entry.started = true;
        queue.firstGrantWait.record(now - entry.enqueuedAt);
      }
      if (entry.remaining <= 0) {
        queue.heap.pop();
        entry.inHeap = false;
        entry.state = "done";
        queue.pendingRequests -= 1;
        this.pendingRequests -= 1;
        this.entries.delete(entry.id);
        const waitedMs = now - entry.enqueuedAt;
        this.waitTime.record(waitedMs);
        this.rememberGrant(entry.id, entry.amount, waitedMs, now);
        settlements.push({ kind: "granted", requestId: entry.id, amount: entry.amount, waitedMs });
      }
      this.refreshClass(classId);
    }
  }

  private fireTimers(now: number, settlements: Settlement[]): void {
    for (let timer = this.timers.popDue(now); timer; timer = this.timers.popDue(now)) {
      const entry = this.entries.get(timer.id);
      if (!entry) continue;
      if (timer.kind === "deadline" && entry.state === "queued" && entry.deadlineAt === timer.at) {
        const waitedMs = now - entry.enqueuedAt;
        this.detach(entry.id, now);
        this.counters.timedOut += 1;
        const error = timeoutError(entry, {
          throttlerId: this.id,
          waitedMs,
          limit: effectiveLimitOf(this.config),
          pendingRequests: this.pendingRequests,
          detachedGraceMs: this.config.detachedGraceMs,
        });
        settlements.push({ kind: "timed_out", requestId: entry.id, error });
      } else if (timer.kind === "grace" && entry.state === "detached" && entry.detachedUntil === timer.at) {
        this.forget(entry);
      }
    }
  }

  private enqueue(entry: Entry): void {
    const queue = this.classQueue(entry.classId);
    if (!entry.inHeap) {
      queue.heap.push(entry);
      entry.inHeap = true;
    }
    queue.pendingRequests += 1;
    queue.pendingAmount += entry.remaining;
    this.pendingRequests += 1;
    this.refreshClass(entry.classId);
  }

  /** Takes a queued entry out of the pending counts and refunds what it was granted. */
  private unqueue(entry: Entry, now: number): void {
    const queue = this.classQueue(entry.classId);
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

  private reattach(entry: Entry, deadlineAt: number | null): void {
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

  private forget(entry: Entry): void {
    entry.state = "done";
    this.entries.delete(entry.id);
    this.detached.delete(entry.id);
  }

  /** Detached entries are bounded like the queue: past `maxQueueSize`, the oldest lose their place. */
  private boundDetached(): void {
    for (const entry of this.detached.values()) {
      if (this.detached.size <= this.config.maxQueueSize) return;
      this.forget(entry);
    }
  }

  private refreshClass(classId: string): void {
    const queue = this.classes.get(classId);
    if (!queue) return;
    const head = headOf(queue);
    if (head) {
      this.scheduler.activate(classId, head.timestampMs);
      return;
    }
    this.scheduler.deactivate(classId);
    if (queue.heap.size === 0 && this.scheduler.removeIfRetired(classId)) this.classes.delete(classId);
  }

  private resolveClass(requested: string): string {
    if (requested === "") {
      if (Object.keys(this.config.classWeights).length > 0) this.counters.classlessRequests += 1;
      return DEFAULT_CLASS;
    }
    if (requested === DEFAULT_CLASS) return DEFAULT_CLASS;
    if (!this.scheduler.isAccepting(requested)) {
      this.counters.unknownClassRequests += 1;
      return DEFAULT_CLASS;
    }
    return requested;
  }

  private ensureClassQueues(): void {
    for (const id of [DEFAULT_CLASS, ...Object.keys(this.config.classWeights)]) {
      if (!this.classes.has(id)) this.classes.set(id, newClassQueue());
    }
  }

  private classQueue(classId: string): ClassQueue {
    let queue = this.classes.get(classId);
    if (!queue) {
      queue = newClassQueue();
      this.classes.set(classId, queue);
    }
    return queue;
  }

  private rememberGrant(id: string, amount: number, waitedMs: number, now: number): void {
    // Bounded like the queue, so a flood of distinct ids cannot grow memory without limit.
    this.completed.remember(id, amount, waitedMs, now + this.config.detachedGraceMs, this.config.maxQueueSize);
  }

  private checkAmount(amount: number, requestId: string): SluiceError | null {
    return checkAmount(this.id, amount, requestId);
  }
}
