import { cancelledErrorOf } from "./abort.ts";
import type { Cancellation, CancelListener } from "./cancellation.ts";
import type { Clock } from "./clock.ts";
import type { PaceSlots } from "./pace-cursor.ts";
import type { QuotaBucketConfig } from "./quota-bucket-config.ts";
import { QuotaBucket, type QuotaBucketSnapshot, type QuotaRequest, type Settlement } from "./quota-bucket.ts";
import type { GrantMemory } from "./remembered-grants.ts";
import type { SluiceError } from "./sluice-error.ts";

export interface AcquireRequest {
  readonly amount: number;
  /** Idempotency key; omitted or "" = not idempotent. */
  readonly requestId?: string;
  readonly clientId?: string;
  readonly timestampMs?: number;
  readonly classId?: string;
  /** Absolute deadline on the driver's clock. */
  readonly deadlineAt?: number | null;
  readonly signal?: AbortSignal | undefined;
  /** The same as `signal` without an EventTarget (a QuotaStream call's); used instead of it when set. */
  readonly cancellation?: Cancellation | undefined;
  /**
   * What an abort means once no other caller waits on the same request id: "cancel" (the caller no
   * longer wants the quota: leave and refund) or "detach" (it may come back: refund, keep the place).
   */
  readonly onAbort?: "cancel" | "detach";
}

export interface Grant {
  readonly granted: number;
  readonly waitedMs: number;
  /** Smooth throttlers: the first slot is this long after the answer, the next ones `paceIntervalMs` apart. */
  readonly paceStartDelayMs?: number;
  readonly paceIntervalMs?: number;
  /** Smooth throttlers: this driver's clock when it answered (clients bound the clocks' offset with it). */
  readonly paceAnsweredAtMs?: number;
}

/**
 * One caller waiting on a request id: a record with its methods on the class (no closures), and
 * the listener of its own cancellation (an AbortSignal's `handleEvent`, or a Cancellation's
 * `cancelled`). Callers joined on the same id form a list through `next`, not a Set per id.
 */
class Waiter implements CancelListener {
  next: Waiter | null = null;

  constructor(
    private readonly driver: QuotaBucketDriver,
    readonly requestId: string,
    readonly onAbort: "cancel" | "detach",
    private readonly resolveGrant: (grant: Grant) => void,
    private readonly rejectGrant: (error: SluiceError) => void,
    private readonly signal: AbortSignal | undefined,
    private readonly cancellation: Cancellation | undefined,
  ) {
    if (cancellation) cancellation.onCancel(this);
    else signal?.addEventListener("abort", this, { once: true });
  }

  resolve(grant: Grant): void {
    this.stopListening();
    this.resolveGrant(grant);
  }

  reject(error: SluiceError): void {
    this.stopListening();
    this.rejectGrant(error);
  }

  /** The AbortSignal fired (EventListener object: no closure per waiter). */
  handleEvent(): void {
    this.cancelled(this.signal?.reason);
  }

  cancelled(reason: unknown): void {
    this.driver.waiterCancelled(this);
    this.rejectGrant(cancelledErrorOf(reason, `quota request "${this.requestId}" on throttler "${this.driver.id}"`));
  }

  private stopListening(): void {
    if (this.cancellation) this.cancellation.onCancel(null);
    else this.signal?.removeEventListener("abort", this);
  }
}

/**
 * The request every driver hands its bucket's `submit`, filled anew for each call: submit keeps
 * nothing of it (a queued request's entry copies what it keeps), so no object is made per call.
 */
const submitted: { -readonly [Field in keyof QuotaRequest]: QuotaRequest[Field] } = {
  requestId: "",
  clientId: "",
  amount: 0,
  timestampMs: 0,
  classId: "",
  deadlineAt: null,
};

/**
 * The thin async shell around a QuotaBucket: turns requests into promises, and sleeps on the clock
 * exactly until the bucket's next due time (a grant, a deadline, a grace expiry) — no polling.
 */
export class QuotaBucketDriver {
  private readonly bucket: QuotaBucket;
  /** The first caller waiting on each request id; joined callers follow it through `next`. */
  private readonly waiters = new Map<string, Waiter>();
  private wakeAt: number | null = null;
  private wakeTimer: AbortController | null = null;
  private closedWith: SluiceError | null = null;

  constructor(
    readonly id: string,
    config: QuotaBucketConfig,
    private readonly clock: Clock,
    /** Its memory of granted request ids, when not its own (a keyed throttler's keys share one: RememberedGrants.scoped). */
    grants?: GrantMemory,
  ) {
    this.bucket = new QuotaBucket(id, config, clock.now(), grants);
  }

  acquire(request: AcquireRequest): Promise<Grant> {
    const settled = this.acquireNow(request);
    return settled instanceof Promise ? settled : Promise.resolve(settled);
  }

  /**
   * As `acquire`, but a request the bucket grants at once (or answers from its memory of granted
   * ids) is answered with the Grant itself: no promise and no reaction for the common case of a
   * bucket with quota and nobody waiting. Refusals and waits are a promise, as from `acquire`.
   * Keeps no reference to `request` (a waiter keeps the fields it needs), so a caller may hand
   * every call the same object.
   */
  acquireNow(request: AcquireRequest): Grant | Promise<Grant> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const { cancellation } = request;
    const signal = cancellation ? undefined : request.signal;
    if (cancellation?.isCancelled) return Promise.reject(cancelledErrorOf(cancellation.cancelReason, `quota request on throttler "${this.id}"`));
    if (signal?.aborted) return Promise.reject(cancelledErrorOf(signal.reason, `quota request on throttler "${this.id}"`));
    const now = this.clock.now();
    submitted.requestId = request.requestId ?? "";
    submitted.clientId = request.clientId ?? "";
    submitted.amount = request.amount;
    submitted.timestampMs = request.timestampMs ?? 0;
    submitted.classId = request.classId ?? "";
    submitted.deadlineAt = request.deadlineAt ?? null;
    const admission = this.bucket.submit(submitted, now, true);
    submitted.requestId = ""; // no caller's string is kept past its use
    submitted.clientId = "";
    if (admission.kind === "refused") return Promise.reject(admission.error);
    if (admission.kind === "granted") return this.grantOf(admission);
    const { requestId } = admission;
    if (admission.kind === "queued") {
      // Fast path: a new request the bucket can settle right now (it had the tokens) needs no waiter,
      // no abort listener and no second pump; under load that is most of them.
      // Polled at the submit's own instant: a request granted on arrival waited 0 ms, not the time
      // between two clock reads (which a loaded machine can stretch past a millisecond).
      const own = this.pump(requestId, now);
      if (own) return own.kind === "granted" ? this.grantOf(own) : Promise.reject(own.error);
    }
    const onAbort = request.onAbort ?? "cancel";
    const promise = new Promise<Grant>((resolve, reject) => {
      const waiter = new Waiter(this, requestId, onAbort, resolve, reject, signal, cancellation);
      const first = this.waiters.get(requestId);
      if (!first) {
        this.waiters.set(requestId, waiter);
        return;
      }
      let last = first;
      while (last.next) last = last.next;
      last.next = waiter;
    });
    if (admission.kind !== "queued") this.pump(); // a new one was pumped above
    return promise;
  }

  tryAcquire(amount: number, classId = ""): boolean {
    if (this.closedWith) return false;
    return this.bucket.tryAcquire(amount, classId, this.clock.now());
  }

  release(amount: number, classId = ""): void {
    this.bucket.release(amount, classId, this.clock.now());
    this.pump();
  }

  /** A persisted balance taken at `atMs` on the driver's clock (see TokenBucket.restore). */
  restoreBalance(balance: number, atMs: number): void {
    this.bucket.restoreBalance(balance, atMs, this.clock.now());
    this.pump();
  }

  /** Units a predecessor's holders still hold (see QuotaBucket.holdRestoredUnits). */
  holdRestoredUnits(amount: number, classId = ""): void {
    this.bucket.holdRestoredUnits(amount, classId, this.clock.now());
  }

  reconfigure(config: QuotaBucketConfig): void {
    this.bucket.reconfigure(config, this.clock.now());
    this.pump();
  }

  snapshot(): QuotaBucketSnapshot {
    return this.bucket.snapshot(this.clock.now());
  }

  /** Fails every waiter with `error` and refuses later requests with it. Idempotent. */
  close(error: SluiceError): void {
    if (this.closedWith) return;
    this.closedWith = error;
    this.cancelWake();
    const waiting = [...this.waiters.values()];
    this.waiters.clear();
    for (const first of waiting) for (let waiter: Waiter | null = first; waiter; waiter = waiter.next) waiter.reject(error);
  }

  /**
   * A waiter's caller gave up (Waiter calls this; not for other callers). It leaves its request id's
   * list; the last one to leave takes the request out of the bucket as its `onAbort` says.
   */
  waiterCancelled(waiter: Waiter): void {
    const first = this.waiters.get(waiter.requestId);
    if (first === undefined) return;
    if (first === waiter) {
      if (waiter.next) this.waiters.set(waiter.requestId, waiter.next);
      else this.waiters.delete(waiter.requestId);
    } else {
      let before = first;
      while (before.next && before.next !== waiter) before = before.next;
      if (before.next === waiter) before.next = waiter.next;
      return;
    }
    if (waiter.next) return;
    const at = this.clock.now();
    if (waiter.onAbort === "detach") this.bucket.detach(waiter.requestId, at);
    else this.bucket.cancel(waiter.requestId, at);
    this.pump();
  }

  /**
   * Collects what became due and sleeps until the next due time. The settlement of `ownId` (a request
   * submitted just now, with no waiter yet) is returned to the caller instead of being settled here.
   */
  private pump(ownId?: string, at?: number): Settlement | null {
    if (this.closedWith) return null;
    const now = at ?? this.clock.now();
    let own: Settlement | null = null;
    for (const settlement of this.bucket.poll(now)) {
      if (settlement.requestId === ownId) own = settlement;
      else this.settle(settlement);
    }
    this.sleepUntilDue(now);
    return own;
  }

  private sleepUntilDue(now: number): void {
    const next = this.bucket.nextWakeAt(now);
    if (next === null) {
      this.cancelWake();
      return;
    }
    if (this.wakeAt !== null && this.wakeAt <= next) return;
    this.cancelWake();
    const timer = new AbortController();
    this.wakeTimer = timer;
    this.wakeAt = next;
    // Round up: waking a fraction of a millisecond early would find nothing due and sleep again.
    this.clock.sleep(Math.max(0, Math.ceil(next - now)), timer.signal).then(
      () => {
        if (this.wakeTimer !== timer) return;
        this.wakeTimer = null;
        this.wakeAt = null;
        this.pump();
      },
      () => {
        /* aborted: a sooner wake-up replaced this one */
      },
    );
  }

  private cancelWake(): void {
    this.wakeTimer?.abort();
    this.wakeTimer = null;
    this.wakeAt = null;
  }

  /** The slots of a smooth grant, relative to now: the answer goes out now. */
  private grantOf(settled: { amount: number; waitedMs: number; pace?: PaceSlots }): Grant {
    const grant = { granted: settled.amount, waitedMs: settled.waitedMs };
    if (!settled.pace) return grant;
    // Negative for a retry answered late: the slots that passed meanwhile are spent, not shifted.
    const now = this.clock.now();
    return { ...grant, paceStartDelayMs: settled.pace.startAt - now, paceIntervalMs: settled.pace.intervalMs, paceAnsweredAtMs: now };
  }

  private settle(settlement: Settlement): void {
    const first = this.waiters.get(settlement.requestId);
    if (!first) return;
    this.waiters.delete(settlement.requestId);
    for (let waiter: Waiter | null = first; waiter; waiter = waiter.next) {
      if (settlement.kind === "granted") waiter.resolve(this.grantOf(settlement));
      else waiter.reject(settlement.error);
    }
  }
}
