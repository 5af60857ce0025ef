import { ClassScheduler, DEFAULT_CLASS } from "./class-scheduler.ts";
import { MinHeap } from "./min-heap.ts";
import { effectiveLimitOf, type QuotaBucketConfig } from "./quota-bucket-config.ts";
import { SluiceError } from "./sluice-error.ts";
import { TokenBucket } from "./token-bucket.ts";
import { WaitHistogram, type WaitHistogramView } from "./wait-histogram.ts";

/**
 * One named throttler on the controller (DESIGN §4): a token bucket shared among weighted classes by
 * start-time fair queuing, lag order inside a class, chunking, deadlines with exact refunds, and
 * idempotent request ids. A pure state machine: every input carries `now`, and outputs are returned.
 *
 * The shell around it (QuotaBucketDriver) calls `submit`, `cancel`, `detach`, `release` or
 * `reconfigure`, then `poll(now)` to collect what became due, and sleeps until `nextWakeAt(now)`.
 * There is no polling loop: nothing happens between the wake-ups the bucket asks for.
 */

/** Amounts are doubles; above 2^53 integer token counts lose precision, so nothing larger is accepted. */
export const MAX_REQUEST_AMOUNT = Number.MAX_SAFE_INTEGER;

export interface QuotaRequest {
  /** Idempotency key; "" makes the request non-idempotent. */
  readonly requestId: string;
  readonly clientId: string;
  readonly amount: number;
  /** Lag priority: smaller is served first inside its class; 0 = no information yet. */
  readonly timestampMs: number;
  /** Requested class; "" or unknown → `default`. */
  readonly classId: string;
  /** Absolute time after which the request stops waiting (and keeps its place for a grace period). */
  readonly deadlineAt: number | null;
}

export type Admission =
  /** Waiting; it settles through `poll`. */
  | { readonly kind: "queued"; readonly requestId: string }
  /** The same id already waits; both settle together and the quota is granted once. */
  | { readonly kind: "joined"; readonly requestId: string }
  /** The same id had been detached; it is back at its original place. */
  | { readonly kind: "reattached"; readonly requestId: string }
  /** Settled at once: amount 0, or a retry of a request already granted (answered, not granted again). */
  | { readonly kind: "granted"; readonly requestId: string; readonly amount: number; readonly waitedMs: number }
  | { readonly kind: "refused"; readonly requestId: string; readonly error: SluiceError };

export type Settlement =
  | { readonly kind: "granted"; readonly requestId: string; readonly amount: number; readonly waitedMs: number }
  | { readonly kind: "timed_out"; readonly requestId: string; readonly error: SluiceError };

type EntryState = "queued" | "detached" | "done";

interface Entry {
  readonly id: string;
  readonly clientId: string;
  classId: string;
  readonly timestampMs: number;
  /** Arrival order: ties of timestamp go to the earlier arrival; kept across detach/reattach. */
  readonly seq: number;
  readonly enqueuedAt: number;
  readonly amount: number;
  remaining: number;
  granted: number;
  /** Virtual time charged for this request's chunks, replayed exactly on refund. */
  chargedVirtualTime: number;
  deadlineAt: number | null;
  detachedUntil: number | null;
  started: boolean;
  state: EntryState;
  inHeap: boolean;
}

interface ClassQueue {
  /** Entries by (lag timestamp, arrival); detached and finished entries are dropped lazily at the head. */
  readonly heap: MinHeap<Entry>;
  pendingRequests: number;
  pendingAmount: number;
  granted: number;
  refunded: number;
  released: number;
  /** Wait until a request's first chunk (the reference's quota_class.wait_time). */
  readonly firstGrantWait: WaitHistogram;
}

interface Timer {
  readonly at: number;
  readonly id: string;
  readonly kind: "deadline" | "grace";
}

interface Completed {
  readonly amount: number;
  readonly waitedMs: number;
  readonly expiresAt: number;
}

export interface QuotaBucketCounters {
  /** Total granted (the reference's `value`). */
  granted: number;
  released: number;
  refunded: number;
  classlessRequests: number;
  unknownClassRequests: number;
  refusedQueueFull: number;
  refusedInvalidAmount: number;
  timedOut: number;
  cancelled: number;
  joined: number;
  reattached: number;
  replayed: number;
}

export interface QuotaClassSnapshot {
  readonly id: string;
  readonly weight: number;
  readonly accepting: boolean;
  readonly active: boolean;
  readonly virtualTime: number;
  readonly pendingRequests: number;
  readonly pendingAmount: number;
  readonly granted: number;
  readonly refunded: number;
  readonly released: number;
  readonly waitTime: WaitHistogramView;
}

export interface QuotaBucketSnapshot {
  readonly id: string;
  /** The rate in force (units/s), null when unlimited. */
  readonly limit: number | null;
  readonly periodMs: number;
  readonly capacity: number | null;
  readonly balance: number | null;
  readonly useClassWeightsAsLimit: boolean;
  readonly maxGrantAmount: number | null;
  readonly maxQueueSize: number;
  readonly pendingRequests: number;
  readonly pendingAmount: number;
  readonly detachedRequests: number;
  readonly counters: Readonly<QuotaBucketCounters>;
  /** Enqueue to final grant. */
  readonly waitTime: WaitHistogramView;
  readonly classes: readonly QuotaClassSnapshot[];
}

export class QuotaBucket {
  readonly id: string;
  private config: QuotaBucketConfig;
  private readonly tokens: TokenBucket;
  private readonly scheduler: ClassScheduler;
  private readonly classes = new Map<string, ClassQueue>();
  private readonly entries = new Map<string, Entry>();
  /** Detached entries in detach order, so the oldest goes first when too many pile up. */
  private readonly detached = new Map<string, Entry>();
  /** Granted request ids, answered again (not granted again) when a retry comes within the grace. */
  private readonly completed = new Map<string, Completed>();
  /**
   * The same ids in grant order, so expiry looks only at the oldest — walking the Map from its
   * start on every request cost time in proportion to the ids remembered (bench/README.md).
   */
  private readonly completedOrder: { readonly id: string; readonly expiresAt: number }[] = [];
  private completedHead = 0;
  private timers = new MinHeap<Timer>(timerBefore);
  private readonly waitTime = new WaitHistogram();
  private readonly counters: QuotaBucketCounters = {
    granted: 0,
    released: 0,
    refunded: 0,
    classlessRequests: 0,
    unknownClassRequests: 0,
    refusedQueueFull: 0,
    refusedInvalidAmount: 0,
    timedOut: 0,
    cancelled: 0,
    joined: 0,
    reattached: 0,
    replayed: 0,
  };
  private pendingRequests = 0;
  private seq = 0;

  constructor(id: string, config: QuotaBucketConfig, now: number) {
    this.id = id;
    this.config = config;
    this.tokens = new TokenBucket({ limit: effectiveLimitOf(config), periodMs: config.periodMs }, now);
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
    this.forgetExpiredGrants(now);
    const replay = this.completed.get(requestId);
    if (replay) {
      this.counters.replayed += 1;
      return { kind: "granted", requestId, amount: replay.amount, waitedMs: replay.waitedMs };
    }
    const existing = this.entries.get(requestId);
    if (existing?.state === "queued") {
      existing.deadlineAt = laterDeadline(existing.deadlineAt, request.deadlineAt);
      this.armDeadline(existing);
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
      return { kind: "refused", requestId, error: this.queueFullError() };
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
    this.armDeadline(entry);
    return { kind: "queued", requestId };
  }

  /** Grants what is due at `now`, detaches what passed its deadline, forgets what passed its grace. */
  poll(now: number): Settlement[] {
    const settlements: Settlement[] = [];
    this.fireTimers(now, settlements);
    this.drain(now, settlements);
    this.compactTimers();
    return settlements;
  }

  /** When `poll` should run next, or null when nothing will become due by itself. */
  nextWakeAt(now: number): number | null {
    let wake: number | null = this.timers.peek()?.at ?? null;
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
    this.timers.push({ at: entry.detachedUntil, id: entry.id, kind: "grace" });
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
    if (this.pendingRequests > 0 || !this.tokens.canGrantWithoutQueue(now)) return false;
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
    this.tokens.reconfigure({ limit: effectiveLimitOf(config), periodMs: config.periodMs }, now);
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
    };
  }

  private drain(now: number, settlements: Settlement[]): void {
    while (this.pendingRequests > 0 && this.tokens.canGrant(now)) {
      const classId = this.scheduler.select();
      if (classId === null) return;
      const queue = this.classQueue(classId);
      const entry = this.headOf(queue);
      if (!entry) {
        this.refreshClass(classId);
        continue;
      }
      const max = this.config.maxGrantAmount;
      const chunk = max === null ? entry.remaining : Math.min(entry.remaining, max);
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
    for (let timer = this.timers.peek(); timer && timer.at <= now; timer = this.timers.peek()) {
      this.timers.pop();
      const entry = this.entries.get(timer.id);
      if (!entry) continue;
      if (timer.kind === "deadline" && entry.state === "queued" && entry.deadlineAt === timer.at) {
        const waitedMs = now - entry.enqueuedAt;
        this.detach(entry.id, now);
        this.counters.timedOut += 1;
        settlements.push({ kind: "timed_out", requestId: entry.id, error: this.timeoutError(entry, waitedMs) });
      } else if (timer.kind === "grace" && entry.state === "detached" && entry.detachedUntil === timer.at) {
        this.forget(entry);
      }
    }
  }

  /**
   * Timers of requests that were granted early stay in the heap until their time; rebuild it when
   * they outnumber the live ones, so memory follows the queue and not the request rate.
   */
  private compactTimers(): void {
    if (this.timers.size <= 2 * this.entries.size + 1024) return;
    const live = new MinHeap<Timer>(timerBefore);
    for (const timer of this.timers.values()) {
      const entry = this.entries.get(timer.id);
      if (!entry) continue;
      const valid = timer.kind === "deadline" ? entry.deadlineAt === timer.at : entry.detachedUntil === timer.at;
      if (valid) live.push(timer);
    }
    this.timers = live;
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
    this.armDeadline(entry);
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

  private armDeadline(entry: Entry): void {
    if (entry.deadlineAt !== null) this.timers.push({ at: entry.deadlineAt, id: entry.id, kind: "deadline" });
  }

  /** The first entry of a class still waiting, dropping detached and finished ones on the way. */
  private headOf(queue: ClassQueue): Entry | undefined {
    for (let head = queue.heap.peek(); head; head = queue.heap.peek()) {
      if (head.state === "queued") return head;
      queue.heap.pop();
      head.inHeap = false;
    }
    return undefined;
  }

  private refreshClass(classId: string): void {
    const queue = this.classes.get(classId);
    if (!queue) return;
    const head = this.headOf(queue);
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
    const expiresAt = now + this.config.detachedGraceMs;
    this.completed.set(id, { amount, waitedMs, expiresAt });
    this.completedOrder.push({ id, expiresAt });
    // Bounded like the queue, so a flood of distinct ids cannot grow memory without limit.
    while (this.completed.size > this.config.maxQueueSize) this.dropOldestGrant();
  }

  private forgetExpiredGrants(now: number): void {
    for (let oldest = this.completedOrder[this.completedHead]; oldest && oldest.expiresAt <= now; oldest = this.completedOrder[this.completedHead]) {
      this.dropOldestGrant();
    }
  }

  private dropOldestGrant(): void {
    const oldest = this.completedOrder[this.completedHead];
    if (!oldest) return;
    this.completedHead += 1;
    // A retried id may have been granted again since: only its latest record counts.
    if (this.completed.get(oldest.id)?.expiresAt === oldest.expiresAt) this.completed.delete(oldest.id);
    if (this.completedHead > 1024 && this.completedHead * 2 > this.completedOrder.length) {
      this.completedOrder.splice(0, this.completedHead);
      this.completedHead = 0;
    }
  }

  private checkAmount(amount: number, requestId: string): SluiceError | null {
    const where = `throttler "${this.id}"${requestId && !requestId.startsWith("~") ? `, request "${requestId}"` : ""}`;
    if (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0) {
      return new SluiceError("INVALID_AMOUNT", `amount must be a finite number >= 0, got ${String(amount)} (${where})`, {
        throttlerId: this.id,
        amount,
      });
    }
    if (amount > MAX_REQUEST_AMOUNT) {
      return new SluiceError(
        "INVALID_AMOUNT",
        `amount ${amount} exceeds the largest single request ${MAX_REQUEST_AMOUNT} (${where}); split it into smaller requests`,
        { throttlerId: this.id, amount, maxAmount: MAX_REQUEST_AMOUNT },
      );
    }
    return null;
  }

  private queueFullError(): SluiceError {
    const size = this.config.maxQueueSize;
    return new SluiceError(
      "QUEUE_FULL",
      `throttler "${this.id}" has ${this.pendingRequests} requests waiting (max_queue_size ${size}); retry with backoff`,
      { throttlerId: this.id, pendingRequests: this.pendingRequests, maxQueueSize: size },
    );
  }

  private timeoutError(entry: Entry, waitedMs: number): SluiceError {
    const limit = effectiveLimitOf(this.config);
    return new SluiceError(
      "QUOTA_TIMEOUT",
      `request "${entry.id}" for ${entry.amount} units (class "${entry.classId}") waited ${Math.round(waitedMs)} ms on throttler "${this.id}" ` +
        `(limit ${limit === null ? "unlimited" : `${limit}/s`}, ${this.pendingRequests} requests waiting) and was not granted; ` +
        `it keeps its place for ${this.config.detachedGraceMs} ms: retry with the same request id to resume`,
      { throttlerId: this.id, requestId: entry.id, amount: entry.amount, waitedMs, limit },
    );
  }
}

function newClassQueue(): ClassQueue {
  return {
    heap: new MinHeap<Entry>((a, b) => a.timestampMs < b.timestampMs || (a.timestampMs === b.timestampMs && a.seq < b.seq)),
    pendingRequests: 0,
    pendingAmount: 0,
    granted: 0,
    refunded: 0,
    released: 0,
    firstGrantWait: new WaitHistogram(),
  };
}

function timerBefore(a: Timer, b: Timer): boolean {
  return a.at < b.at;
}

function laterDeadline(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : Math.max(a, b);
}
