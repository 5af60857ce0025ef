/**
 * The callers of a PacedThrottler that wait for slots, in FIFO order: their promises, the live count
 * and amount the client sizes its refills by, and how they leave (served, aborted, failed, closed).
 * Kept apart from the throttler so that the refill and slot logic reads without the queue's bookkeeping.
 */
import { cancelledError } from "./abort.ts";
import type { SluiceError } from "./sluice-error.ts";

export interface WaitingCaller {
  readonly amount: number;
  settled: boolean;
  resolve(): void;
  reject(error: SluiceError): void;
}

/** Past this many served callers at the front (and half the array), the array is compacted. */
const COMPACT_AFTER = 1024;

export class PacedWaitingCallers {
  private readonly queue: WaitingCaller[] = [];
  private head = 0;
  private live = 0;
  private amount = 0;

  /** Callers still waiting. */
  get count(): number {
    return this.live;
  }

  /** What the callers still waiting asked for, together. */
  get queuedAmount(): number {
    return this.amount;
  }

  /**
   * Queues a caller for `amount`; `changed` runs once it is queued and again if its signal aborts it
   * (the owner then hands out what it can). `what` names the call in a cancellation error.
   */
  add(amount: number, signal: AbortSignal | undefined, what: string, changed: () => void): Promise<void> {
    if (signal?.aborted) return Promise.reject(cancelledError(signal, what));
    // A smooth client queues its caller at every wake-up: without a signal, one object and the
    // promise's own executor, no closures of ours (each one costs, under tsx, a defineProperty too).
    const request = signal ? new AbortableCaller(amount, signal, what, this, changed) : new PlainCaller(amount);
    const promise = new Promise<void>((resolve, reject) => {
      request.settle = resolve;
      request.fail = reject;
    });
    this.queue.push(request);
    this.live += 1;
    this.amount += amount;
    changed();
    return promise;
  }

  /** A caller whose signal aborted leaves the count and the amount at once (see AbortableCaller). */
  left(caller: WaitingCaller): void {
    this.live -= 1;
    this.amount = this.live === 0 ? 0 : this.amount - caller.amount;
  }

  /** The caller at the front, skipping (and dropping) the ones that already left. */
  front(): WaitingCaller | undefined {
    while (this.head < this.queue.length) {
      const head = this.queue[this.head];
      if (!head) return undefined;
      if (!head.settled) return head;
      this.head += 1;
    }
    return undefined;
  }

  /** The first caller still waiting, without moving the front. */
  firstLive(): WaitingCaller | undefined {
    for (let i = this.head; i < this.queue.length; i++) {
      const request = this.queue[i];
      if (request && !request.settled) return request;
    }
    return undefined;
  }

  /** Serves the caller at the front (the one `front` returned): its promise resolves. */
  serveHead(caller: WaitingCaller): void {
    this.live -= 1;
    this.amount = this.live === 0 ? 0 : this.amount - caller.amount;
    caller.settled = true;
    this.head += 1;
    caller.resolve();
  }

  /** Drops served callers from the front once they are many, so the array does not grow forever. */
  compact(): void {
    if (this.head > COMPACT_AFTER && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Fails callers from the back, the latest first, until `enough(queuedAmount)` holds. */
  failFromBack(error: SluiceError, enough: (queuedAmount: number) => boolean): void {
    for (let i = this.queue.length - 1; i >= this.head; i--) {
      if (enough(this.amount)) break;
      const request = this.queue[i];
      if (!request || request.settled) continue;
      request.settled = true;
      this.live -= 1;
      this.amount -= request.amount;
      request.reject(error);
    }
  }

  /** Fails every caller still waiting and empties the queue. */
  failAll(error: SluiceError): void {
    for (let i = this.head; i < this.queue.length; i++) {
      const request = this.queue[i];
      if (request && !request.settled) {
        request.settled = true;
        request.reject(error);
      }
    }
    this.queue.length = 0;
    this.head = 0;
    this.live = 0;
    this.amount = 0;
  }
}

/** A waiting caller without a signal: its promise's settle functions, nothing else. */
class PlainCaller implements WaitingCaller {
  settled = false;
  settle: () => void = noop;
  fail: (error: SluiceError) => void = noop;

  constructor(readonly amount: number) {}

  resolve(): void {
    this.settle();
  }

  reject(error: SluiceError): void {
    this.fail(error);
  }
}

/** A waiting caller with a signal: leaves the queue when it aborts, and stops listening once settled. */
class AbortableCaller extends PlainCaller {
  private readonly onAbort = (): void => {
    if (this.settled) return;
    this.settled = true;
    this.callers.left(this);
    this.fail(cancelledError(this.signal, this.what));
    this.changed();
  };

  constructor(
    amount: number,
    private readonly signal: AbortSignal,
    private readonly what: string,
    private readonly callers: PacedWaitingCallers,
    private readonly changed: () => void,
  ) {
    super(amount);
    signal.addEventListener("abort", this.onAbort, { once: true });
  }

  override resolve(): void {
    this.signal.removeEventListener("abort", this.onAbort);
    this.settle();
  }

  override reject(error: SluiceError): void {
    this.signal.removeEventListener("abort", this.onAbort);
    this.fail(error);
  }
}

const noop = (): void => {};
