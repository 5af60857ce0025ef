import { cancelledError } from "./abort.ts";
import type { Clock } from "./clock.ts";
import type { PaceSlots } from "./pace-cursor.ts";
import type { QuotaBucketConfig } from "./quota-bucket-config.ts";
import { QuotaBucket, type QuotaBucketSnapshot, type Settlement } from "./quota-bucket.ts";
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
  readonly signal?: AbortSignal;
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
}

interface Waiter {
  resolve(grant: Grant): void;
  reject(error: SluiceError): void;
}

/**
 * The thin async shell around a QuotaBucket: turns requests into promises, and sleeps on the clock
 * exactly until the bucket's next due time (a grant, a deadline, a grace expiry) — no polling.
 */
export class QuotaBucketDriver {
  private readonly bucket: QuotaBucket;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private wakeAt: number | null = null;
  private wakeTimer: AbortController | null = null;
  private closedWith: SluiceError | null = null;

  constructor(
    readonly id: string,
    config: QuotaBucketConfig,
    private readonly clock: Clock,
  ) {
    this.bucket = new QuotaBucket(id, config, clock.now());
  }

  acquire(request: AcquireRequest): Promise<Grant> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const { signal } = request;
    if (signal?.aborted) return Promise.reject(cancelledError(signal, `quota request on throttler "${this.id}"`));
    const now = this.clock.now();
    const admission = this.bucket.submit(
      {
        requestId: request.requestId ?? "",
        clientId: request.clientId ?? "",
        amount: request.amount,
        timestampMs: request.timestampMs ?? 0,
        classId: request.classId ?? "",
        deadlineAt: request.deadlineAt ?? null,
      },
      now,
    );
    if (admission.kind === "refused") return Promise.reject(admission.error);
    if (admission.kind === "granted") return Promise.resolve(this.grantOf(admission));
    const { requestId } = admission;
    if (admission.kind === "queued") {
      // Fast path: a new request the bucket can settle right now (it had the tokens) needs no waiter,
      // no abort listener and no second pump; under load that is most of them.
      const own = this.pump(requestId);
      if (own) return own.kind === "granted" ? Promise.resolve(this.grantOf(own)) : Promise.reject(own.error);
    }
    const promise = new Promise<Grant>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: (grant) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(grant);
        },
        reject: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      };
      const onAbort = () => {
        const set = this.waiters.get(requestId);
        set?.delete(waiter);
        if (set?.size === 0) {
          this.waiters.delete(requestId);
          const at = this.clock.now();
          if (request.onAbort === "detach") this.bucket.detach(requestId, at);
          else this.bucket.cancel(requestId, at);
          this.pump();
        }
        if (signal) reject(cancelledError(signal, `quota request "${requestId}" on throttler "${this.id}"`));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      let set = this.waiters.get(requestId);
      if (!set) {
        set = new Set();
        this.waiters.set(requestId, set);
      }
      set.add(waiter);
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
    for (const set of waiting) for (const waiter of set) waiter.reject(error);
  }

  /**
   * Collects what became due and sleeps until the next due time. The settlement of `ownId` (a request
   * submitted just now, with no waiter yet) is returned to the caller instead of being settled here.
   */
  private pump(ownId?: string): Settlement | null {
    if (this.closedWith) return null;
    const now = this.clock.now();
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
    return { ...grant, paceStartDelayMs: settled.pace.startAt - this.clock.now(), paceIntervalMs: settled.pace.intervalMs };
  }

  private settle(settlement: Settlement): void {
    const set = this.waiters.get(settlement.requestId);
    if (!set) return;
    this.waiters.delete(settlement.requestId);
    for (const waiter of set) {
      if (settlement.kind === "granted") waiter.resolve(this.grantOf(settlement));
      else waiter.reject(settlement.error);
    }
  }
}
