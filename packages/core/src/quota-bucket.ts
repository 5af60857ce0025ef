import { DEFAULT_CLASS } from "./class-scheduler.ts";
import { headOf } from "./class-queue.ts";
import { PaceCursor, maxPacedAnswer } from "./pace-cursor.ts";
import { effectiveLimitOf, paceConfigOf, GRANT_CHUNKS_PER_POLL, REQUEST_IDS_PER_QUEUE_SLOT, type QuotaBucketConfig } from "./quota-bucket-config.ts";
import { checkAmount, reusedIdError, queueFullError, timeoutError } from "./quota-bucket-errors.ts";
import { quotaBucketMemoryOf, quotaBucketSnapshotOf } from "./quota-bucket-report.ts";
import type { QuotaBucketMemory, QuotaBucketSnapshot } from "./quota-bucket-snapshot.ts";
import { QuotaBucketState } from "./quota-bucket-state.ts";
import { chunkOf, laterDeadline, newQueuedEntry, requestKey } from "./quota-entry.ts";
import type { Admission, QuotaRequest, Settlement } from "./quota-request.ts";
import { reconfiguredUnitSource } from "./unit-source.ts";

export { MAX_REQUEST_AMOUNT, type Admission, type QuotaRequest, type Settlement } from "./quota-request.ts";
export type { QuotaBucketCounters, QuotaBucketMemory, QuotaBucketSnapshot, QuotaClassSnapshot } from "./quota-bucket-snapshot.ts";

/**
 * One named throttler on the controller (docs/design.md §9): a token bucket shared among weighted classes by
 * start-time fair queuing, lag order inside a class, chunking, deadlines with exact refunds, and
 * idempotent request ids. A pure state machine: every input carries `now`, and outputs are returned.
 *
 * The shell around it (QuotaBucketDriver) calls `submit`, `cancel`, `detach`, `release` or
 * `reconfigure`, then `poll(now)` to collect what became due, and sleeps until `nextWakeAt(now)`.
 * There is no polling loop: nothing happens between the wake-ups the bucket asks for.
 */
export class QuotaBucket extends QuotaBucketState {
  get pending(): number {
    return this.pendingRequests;
  }

  /**
   * Admits a request. With `grantOnArrival`, a request that finds nobody waiting and quota at hand
   * is granted here ("granted", waited 0 ms), as the poll at the same instant would grant it: for a
   * caller that polls right after each submit (QuotaBucketDriver). Without it, it is "queued" and
   * granted by the next poll, which orders requests submitted together by lag. Keeps no reference
   * to `request` (a queued entry copies its fields): the driver hands every call the same object.
   */
  submit(request: QuotaRequest, now: number, grantOnArrival = false): Admission {
    const requestId = requestKey(request.requestId, this.seq);
    const amountError = checkAmount(this.id, request.amount, request.requestId);
    if (amountError) {
      this.counters.refusedInvalidAmount += 1;
      return { kind: "refused", requestId, error: amountError };
    }
    this.completed.forgetExpired(now);
    const replay = this.completed.get(requestId);
    // Most requests arrive with nothing queued or detached: the count is read, not the map.
    const existing = this.entriesHeld === 0 ? undefined : this.entries.get(requestId);
    const earlierAmount = replay?.amount ?? existing?.amount;
    // A smooth answer is capped at one reach of slots (see drain): a retry of a request answered in
    // part is answered with the same part, as the client that asked again for the rest expects.
    const answeredInPart = replay?.pace !== undefined && replay.amount < request.amount;
    if (earlierAmount !== undefined && earlierAmount !== request.amount && !answeredInPart) {
      // An idempotency key stands for one request: the same id with another amount is a client bug,
      // never a retry, and answering it with the first request's grant would mislead its caller.
      this.counters.refusedInvalidAmount += 1;
      return { kind: "refused", requestId, error: reusedIdError(this.id, request.requestId, earlierAmount, request.amount) };
    }
    if (replay) {
      this.counters.replayed += 1;
      return { kind: "granted", requestId, amount: replay.amount, waitedMs: replay.waitedMs, ...(replay.pace ? { pace: replay.pace } : {}) };
    }
    if (existing?.state === "queued") {
      existing.deadlineAt = laterDeadline(existing.deadlineAt, request.deadlineAt);
      this.timers.armDeadline(existing);
      this.counters.joined += 1;
      return { kind: "joined", requestId };
    }
    if (request.amount === 0 && existing === undefined) {
      return { kind: "granted", requestId, amount: 0, waitedMs: 0 };
    }
    // A hard bound: a detached request coming back takes a place in the queue like a new one.
    if (this.pendingRequests >= this.config.maxQueueSize) {
      this.counters.refusedQueueFull += 1;
      return { kind: "refused", requestId, error: queueFullError(this.id, this.pendingRequests, this.config.maxQueueSize) };
    }
    if (existing?.state === "detached") {
      this.reattach(existing, request.deadlineAt);
      return { kind: "reattached", requestId };
    }
    const classId = this.classes.resolve(request.classId, this.config, this.counters);
    if (grantOnArrival && this.pendingRequests === 0 && this.pacer === null && this.grantableOnArrival(request, now)) {
      return this.grantOnArrival(requestId, request, classId, now);
    }
    const entry = newQueuedEntry({
      id: requestId,
      request,
      classId,
      seq: this.seq++,
      now,
      needsPositiveBalance: this.pendingRequests === 0,
    });
    this.arrival.arrived(entry);
    this.holdEntry(entry);
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
    this.completed.forgetExpired(now);
    return settlements;
  }

  /** When `poll` should run next, or null when nothing will become due by itself. */
  nextWakeAt(now: number): number | null {
    let wake = this.timers.nextAt();
    if (this.pendingRequests > 0) {
      let ms = this.pacer ? this.pacer.msUntilAnswerable(now) : this.tokens.msUntilGrantable(now);
      if (ms !== null) ms = this.arrival.wakeDelay(ms, this.tokens, now);
      if (ms !== null && (wake === null || now + ms < wake)) wake = now + ms;
    }
    return wake;
  }

  /** The caller gave up: the request leaves at once and everything granted to it is refunded. */
  cancel(requestId: string, now: number): boolean {
    const entry = this.entries.get(requestId);
    if (!entry) return false;
    const wasQueued = entry.state === "queued";
    if (wasQueued) this.unqueue(entry, now);
    entry.state = "done";
    if (wasQueued) this.classes.refresh(entry.classId);
    this.detached.delete(requestId);
    this.dropEntry(requestId);
    this.counters.cancelled += 1;
    this.timers.compact(this.entries);
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
    this.classes.refresh(entry.classId);
    this.boundDetached();
    return true;
  }

  /**
   * Takes quota without queueing: only while nobody waits and the balance is positive (the
   * reference's TryAcquire). Returns whether it was taken.
   */
  tryAcquire(amount: number, classId: string, now: number): boolean {
    if (checkAmount(this.id, amount, "")) return false;
    if (amount === 0) return true;
    if (this.pendingRequests > 0 || !this.tokens.canGrantWithoutQueue(now) || !this.tokens.canTake(amount, now)) return false;
    if (this.pacer) {
      // Taken at once means all units at `now`: only when the next slot has come.
      if (this.pacer.nextSlotAt > now) return false;
      this.pacer.reserve(amount, now);
    }
    this.tokens.take(amount, now);
    const resolved = this.classes.resolve(classId, this.config, this.counters);
    // Charged like a grant, so that a release of it refunds a charge that was made. (Nobody waits
    // here, so no class is active and the charge is reset at once: idle classes bank nothing.)
    this.scheduler.charge(resolved, amount);
    this.counters.granted += amount;
    this.classes.get(resolved).granted += amount;
    return true;
  }

  /** Returns unused quota to the bucket (never above its capacity). */
  release(amount: number, classId: string, now: number): void {
    const error = checkAmount(this.id, amount, "");
    if (error) throw error;
    this.tokens.release(amount, now);
    this.counters.released += amount;
    const id = classId === "" ? DEFAULT_CLASS : classId;
    const queue = this.classes.find(id);
    if (queue) {
      queue.released += amount;
      this.scheduler.refund(id, amount);
    }
  }

  /**
   * Restores a persisted balance taken at `atMs` (see TokenBucket.restore); queued requests are not
   * touched. A concurrency throttler has no balance to restore: its units in use are leases, which
   * come back through holdRestoredUnits.
   */
  restoreBalance(balance: number, atMs: number, now: number): void {
    if (this.tokens.kind === "rate") this.tokens.restore(balance, atMs, now);
  }

  /**
   * Units a predecessor leased out and whose holders still hold them (docs/design.md §5.2): a concurrency
   * bucket counts them as in use whatever its limit now is (they are in use already), charged like
   * a grant so that their release later refunds a charge that was made. A rate bucket ignores it.
   */
  holdRestoredUnits(amount: number, classId: string, now: number): void {
    if (this.tokens.kind !== "concurrency" || checkAmount(this.id, amount, "") || amount === 0) return;
    this.tokens.take(amount, now);
    const resolved = this.classes.resolve(classId, this.config, this.counters);
    this.scheduler.charge(resolved, amount);
    this.counters.granted += amount;
    this.classes.get(resolved).granted += amount;
  }

  /**
   * Applies new limits, weights and sizes without losing accrued tokens or anyone's place. A class
   * dropped here stops accepting requests (they go to `default`) and disappears once drained.
   */
  reconfigure(config: QuotaBucketConfig, now: number): void {
    this.config = config;
    this.tokens = reconfiguredUnitSource(this.tokens, config, now);
    // A new limit applies to slots not yet answered; turning smooth on starts one reach ahead,
    // since clients may still pool quota granted unpaced.
    if (!config.smooth) this.pacer = null;
    else if (this.pacer) this.pacer.reconfigure(paceConfigOf(config));
    else this.pacer = new PaceCursor(paceConfigOf(config), now);
    this.scheduler.reconfigure(config.classWeights);
    this.classes.ensure([DEFAULT_CLASS, ...Object.keys(config.classWeights)]);
    for (const id of this.classes.ids()) this.classes.refresh(id);
  }

  snapshot(now: number): QuotaBucketSnapshot {
    const { id, config, tokens, classes, pendingRequests, counters, waitTime } = this;
    return quotaBucketSnapshotOf({ id, config, tokens, classes, pendingRequests, detachedRequests: this.detached.size, counters, waitTime }, now);
  }

  /** What the bucket holds, in objects (see QuotaBucketMemory for the bounds). */
  memory(): QuotaBucketMemory {
    const held = { requests: this.entries.size, queueEntries: this.classes.heldEntries(), timers: this.timers.size };
    return quotaBucketMemoryOf({ ...held, rememberedRequestIds: this.completed.size, forgottenEarlyRequestIds: this.completed.forgottenEarly }, this.config);
  }

  /**
   * Whether a request arriving with nobody waiting would be granted in full by the poll right after
   * its submit: a deadline still ahead (that poll times out a request due already, before granting),
   * the arrival rule's positive balance (EmptyQueueArrival), room for all of it, and one chunk (a
   * request of several chunks goes through the queue).
   */
  private grantableOnArrival(request: QuotaRequest, now: number): boolean {
    const amount = request.amount;
    return (
      (request.deadlineAt === null || request.deadlineAt > now) &&
      this.tokens.canGrantWithoutQueue(now) &&
      this.tokens.canTake(amount, now) &&
      chunkOf(amount, this.config.maxGrantAmount) === amount
    );
  }

  /**
   * The grant a queued request would get from the poll in the same instant, made without the queue:
   * no entry, heap, timer or poll (most requests of a busy controller with many keys arrive to an
   * idle bucket). That poll would also fire the timers due (grace ends of detached requests, which
   * concern other ids): they fire at the wake-up the driver has set for them instead. Every figure moves as it would there: the sequence number, the units taken, the
   * counters, both wait figures (0 ms), and the request id remembered for the grace.
   */
  private grantOnArrival(requestId: string, request: QuotaRequest, classId: string, now: number): Admission {
    const amount = request.amount;
    this.seq++;
    this.tokens.take(amount, now);
    // No charge: with nobody waiting no class is active, so every virtual time is 0, and a queued
    // grant's charge would be reset as its class went idle again (ClassScheduler.maybeReset).
    const queue = this.classes.get(classId);
    queue.granted += amount;
    this.counters.granted += amount;
    queue.firstGrantWait.record(0, now);
    this.waitTime.record(0, now);
    if (request.requestId !== "") {
      this.completed.remember(requestId, amount, 0, now + this.config.detachedGraceMs, this.config.maxQueueSize * REQUEST_IDS_PER_QUEUE_SLOT);
    }
    return { kind: "granted", requestId, amount, waitedMs: 0 };
  }

  private drain(now: number, settlements: Settlement[]): void {
    for (
      let chunks = 0;
      chunks < GRANT_CHUNKS_PER_POLL && this.pendingRequests > 0 && (this.pacer ? this.pacer.canAnswer(now) : this.tokens.canGrant(now));
      chunks++
    ) {
      const classId = this.scheduler.select();
      if (classId === null) return;
      const queue = this.classes.get(classId);
      const entry = headOf(queue);
      if (!entry) {
        this.classes.refresh(classId);
        continue;
      }
      if (entry.needsPositiveBalance) {
        if (!this.arrival.mayGrant(entry, this.tokens, now)) return;
        this.arrival.clear(entry);
      }
      // A smooth grant is one run of consecutive slots: chunks interleaved with other requests would
      // scatter its slots, which one answer cannot describe (docs/internals/smooth-shaping.md). Nor may a run reach
      // past one answer of the limit in force (maxPacedAnswer): a controller that starts after this
      // one counts on no slot answered here lying further ahead than that (PaceCursor's reach). A
      // request asked for under an earlier, larger limit (queued or in flight when the limit fell)
      // is answered in part, and its client asks again for the rest.
      const chunk = this.pacer ? Math.min(entry.remaining, maxPacedAnswer(paceConfigOf(this.config))) : chunkOf(entry.remaining, this.config.maxGrantAmount);
      // Concurrency: the chunk at the head must fit; it keeps its place until units come back.
      if (!this.tokens.canTake(chunk, now)) return;
      const pace = this.pacer?.reserve(chunk, now);
      this.tokens.take(chunk, now);
      entry.chargedVirtualTime += this.scheduler.charge(classId, chunk);
      entry.granted += chunk;
      // Answered in part (smooth only): the rest is not kept waiting here; the client asks again.
      const dropped = pace ? entry.remaining - chunk : 0;
      entry.remaining -= chunk + dropped;
      queue.pendingAmount -= chunk + dropped;
      queue.granted += chunk;
      this.counters.granted += chunk;
      if (!entry.started) {
        entry.started = true;
        queue.firstGrantWait.record(now - entry.enqueuedAt, now);
      }
      if (entry.remaining <= 0) {
        queue.heap.pop();
        entry.inHeap = false;
        entry.state = "done";
        queue.pendingRequests -= 1;
        this.pendingRequests -= 1;
        this.dropEntry(entry.id);
        const waitedMs = now - entry.enqueuedAt;
        this.waitTime.record(waitedMs, now);
        // A request without an id cannot be retried as the same request: nothing to remember.
        // Kept for the grace, or until REQUEST_IDS_PER_QUEUE_SLOT × max_queue_size newer ids were
        // granted (RememberedGrants): fresh work is never refused for bookkeeping.
        if (entry.requestId !== "") {
          const bound = this.config.maxQueueSize * REQUEST_IDS_PER_QUEUE_SLOT;
          this.completed.remember(entry.id, entry.granted, waitedMs, now + this.config.detachedGraceMs, bound, pace);
        }
        settlements.push(
          pace
            ? { kind: "granted", requestId: entry.id, amount: entry.granted, waitedMs, pace }
            : { kind: "granted", requestId: entry.id, amount: entry.amount, waitedMs },
        );
      }
      this.classes.refresh(classId);
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
          kind: this.tokens.kind,
          pendingRequests: this.pendingRequests,
          detachedGraceMs: this.config.detachedGraceMs,
        });
        settlements.push({ kind: "timed_out", requestId: entry.id, error });
      } else if (timer.kind === "grace" && entry.state === "detached" && entry.detachedUntil === timer.at) {
        this.forget(entry);
      }
    }
  }
}
