import { asSluiceError, cancelledError } from "./abort.ts";
import type { Clock } from "./clock.ts";
import { fits, invalidAmount, settleToZero, TOLERANCE, validAmount } from "./prefetch-amounts.ts";
import { PrefetchSizer } from "./prefetch-sizer.ts";
import { SluiceError } from "./sluice-error.ts";
import { RESOLVED, type ThrottleOptions, type Throttler } from "./throttler.ts";
import type { PrefetchConfig, QuotaRemote, PrefetchStats } from "./prefetch-config.ts";

export type { PrefetchConfig, PrefetchStats, QuotaRemote } from "./prefetch-config.ts";

interface LocalRequest {
  readonly amount: number;
  /** Arrival number: a final refill failure fails only callers that were waiting when it was sent. */
  readonly seq: number;
  settled: boolean;
  resolve(): void;
  reject(error: SluiceError): void;
}

/**
 * A client-side pool of quota (docs/design.md §9.7). A `throttle(n)` that fits the pool and has nobody ahead
 * of it returns at once without a remote call; otherwise it waits in a local FIFO and the client
 * asks the remote for `max(prefetch, deficit)`. The prefetch size adapts so that refills run at about
 * `targetRps`, within [min, max]. When a refill lands and the callers waiting for it took theirs, the
 * pool keeps at most `maxPrefetchAmount` and returns the rest to the remote in one release.
 *
 * Better than the reference: an aborted caller leaves the queue at once (its share of an arriving
 * refill stays in the pool for the next caller), and a refill that fails with a retriable error fails
 * nobody — it is asked again. A final error (the retry budget spent) fails only callers that were
 * already waiting when that refill was sent — their own wait has lasted its whole budget — and only as
 * many as the refills still in flight cannot cover; later callers keep waiting on a new refill.
 */
export class PrefetchingThrottler implements Throttler {
  private available = 0;
  private inFlight = 0;
  private queuedAmount = 0;
  private readonly queue: LocalRequest[] = [];
  private queueHead = 0;
  private liveQueued = 0;
  private readonly sizer: PrefetchSizer;
  private arrivals = 0;
  private refills = 0;
  private refillFailures = 0;
  private returned = 0;
  /** What the latest failed tryAcquire asked for: it will come back for it (see `returnExcess`). */
  private stockedUpFor = 0;
  /** When that try failed: a caller that has not come back within a request_period no longer holds room. */
  private stockedUpAt = 0;
  private retryPending = false;
  private retiring = false;
  private closedWith: SluiceError | null = null;
  private readonly lifetime = new AbortController();
  /** Only an unbounded client refills ahead and lends: see `refillAhead` and `lend`. */
  private readonly refillsAhead: boolean;
  /** A refill failed and none has landed since: nothing is lent (docs/design.md §9.8, no silent fallback). */
  private refillFailing = false;

  constructor(
    private readonly config: PrefetchConfig,
    private readonly remote: QuotaRemote,
    private readonly clock: Clock,
    private readonly name = "throttler",
  ) {
    this.sizer = new PrefetchSizer(config);
    this.refillsAhead = config.unbounded === true;
  }

  throttle(amount: number, options?: ThrottleOptions): Promise<void> {
    // 0 is granted at once (docs/design.md §9.1), even behind waiting callers: it takes nothing from anyone.
    if (amount === 0) return RESOLVED;
    if (this.liveQueued === 0 && amount >= 0 && fits(amount, this.available)) {
      this.available = Math.max(0, this.available - amount);
      if (this.refillsAhead && this.inFlight === 0 && this.available * 2 < this.sizer.prefetchAmount) this.refillAhead();
      return RESOLVED;
    }
    if (this.refillsAhead && this.liveQueued === 0 && this.lend(amount, options?.signal)) return RESOLVED;
    return this.enqueue(amount, options?.signal);
  }

  /**
   * An unlimited throttler's controller grants every request at once, so a caller the pool cannot
   * cover need not wait for the round trip: it takes what the refills in flight will bring (the pool
   * goes below 0, and the landing refills pay that back first), and a refill for whatever they do not
   * cover goes out now. This removes the wait of a job's first RequestQuota and of every refill that
   * lands late on a loaded controller. Not while a refill is failing (callers wait for the controller
   * as with any throttler, docs/design.md §9.8), nor when retiring or closed. What is lent is never more than
   * what is in flight, so at most the refills in flight are used before the controller has answered.
   */
  private lend(amount: number, signal: AbortSignal | undefined): boolean {
    if (this.refillFailing || this.retiring || this.closedWith !== null || !validAmount(amount) || signal?.aborted) return false;
    const uncovered = amount - (this.available + this.inFlight);
    if (uncovered > TOLERANCE * Math.max(1, amount)) {
      // Sized as for a waiting caller: max(prefetch, deficit).
      this.sizer.update(this.clock.now());
      this.refill(Math.max(this.sizer.prefetchAmount, uncovered));
    }
    this.available -= amount;
    return true;
  }

  tryAcquire(amount: number): boolean {
    if (amount === 0) return true;
    if (this.liveQueued === 0 && amount >= 0 && fits(amount, this.available)) {
      this.available = Math.max(0, this.available - amount);
      if (this.refillsAhead && this.inFlight === 0 && this.available * 2 < this.sizer.prefetchAmount) this.refillAhead();
      // Only the try it stocked up for (or a larger one) ends the stock-up: a small try in between
      // must not let the landing refill be trimmed away before the large one comes back for it.
      if (amount + TOLERANCE >= this.stockedUpFor) this.stockedUpFor = 0;
      return true;
    }
    // Stock up so that a later try can succeed without waiting (the reference's StockUp).
    if (this.closedWith === null && validAmount(amount)) {
      // The largest pending try decides; a smaller failed try in between does not shrink the room.
      this.stockedUpFor = Math.max(this.stockedUpFor, amount);
      this.stockedUpAt = this.clock.now();
      const forecast = this.available + this.inFlight - this.queuedAmount;
      if (forecast < amount) this.refill(Math.max(this.sizer.prefetchAmount, amount - forecast));
    }
    return false;
  }

  release(amount: number): void {
    if (!validAmount(amount)) throw invalidAmount(this.name, amount);
    // A closed client's pool was already given back and nobody takes from it: this goes back too.
    if (this.closedWith) {
      this.giveToRemote(amount);
      return;
    }
    this.available += amount;
    this.satisfy();
  }

  get isClosed(): boolean {
    return this.closedWith !== null;
  }

  stats(): PrefetchStats {
    return {
      available: this.available,
      inFlight: this.inFlight,
      queuedRequests: this.liveQueued,
      queuedAmount: this.queuedAmount,
      prefetchAmount: this.sizer.prefetchAmount,
      refills: this.refills,
      refillFailures: this.refillFailures,
      returned: this.returned,
    };
  }

  /**
   * Stops taking new work after a reconfiguration replaced this client: callers already waiting are
   * still served, then the unused pool goes back to the remote and the client closes.
   */
  retire(): void {
    this.retiring = true;
    this.maybeFinishRetiring();
  }

  /**
   * Fails waiting callers and later calls, stops refills and returns the pool. Idempotent. A reason
   * fails them with CANCELLED; an error (say, the throttler was removed) fails them with that error.
   */
  close(reason: string | SluiceError = "the throttler client was closed"): void {
    if (this.closedWith) return;
    this.closedWith = typeof reason === "string" ? new SluiceError("CANCELLED", `${this.name}: ${reason}`, { throttlerId: this.name }) : reason;
    this.lifetime.abort(this.closedWith);
    for (let i = this.queueHead; i < this.queue.length; i++) {
      const request = this.queue[i];
      if (request && !request.settled) {
        request.settled = true;
        request.reject(this.closedWith);
      }
    }
    this.queue.length = 0;
    this.queueHead = 0;
    this.liveQueued = 0;
    this.queuedAmount = 0;
    this.giveBack();
  }

  private enqueue(amount: number, signal: AbortSignal | undefined): Promise<void> {
    if (!validAmount(amount)) return Promise.reject(invalidAmount(this.name, amount));
    if (this.closedWith) return Promise.reject(this.closedWith);
    if (signal?.aborted) return Promise.reject(cancelledError(signal, `throttle(${amount}) on "${this.name}"`));
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        if (request.settled || !signal) return;
        request.settled = true;
        this.liveQueued -= 1;
        this.queuedAmount = this.liveQueued === 0 ? 0 : this.queuedAmount - amount;
        reject(cancelledError(signal, `throttle(${amount}) on "${this.name}"`));
        // The request ahead may have been what blocked smaller ones behind it.
        this.satisfy();
      };
      const request: LocalRequest = {
        amount,
        seq: this.arrivals++,
        settled: false,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        reject: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(request);
      this.liveQueued += 1;
      this.queuedAmount += amount;
      this.satisfy();
      this.requestIfNeeded();
    });
  }

  /** Hands the pool to waiting callers in FIFO order; a large head request waits for its whole amount. */
  private satisfy(): void {
    while (this.queueHead < this.queue.length) {
      const head = this.queue[this.queueHead];
      if (!head) break;
      if (head.settled) {
        this.queueHead += 1;
        continue;
      }
      if (!fits(head.amount, this.available)) break;
      this.available = Math.max(0, this.available - head.amount);
      this.liveQueued -= 1;
      this.queuedAmount = this.liveQueued === 0 ? 0 : this.queuedAmount - head.amount;
      head.settled = true;
      this.queueHead += 1;
      head.resolve();
    }
    if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
    this.maybeFinishRetiring();
  }

  private requestIfNeeded(): void {
    if (this.closedWith) return;
    const forecast = this.available + this.inFlight - this.queuedAmount;
    if (fits(this.queuedAmount, this.available + this.inFlight)) return;
    this.sizer.update(this.clock.now(), true);
    this.refill(Math.max(this.sizer.prefetchAmount, -forecast));
  }

  /**
   * Asks for the next refill while half of the pool is still there, so that a caller whose quota
   * does not bind never waits a round trip (otherwise a caller finds the pool empty once per
   * request_period, and at every doubling while the pool grows). Sized so that pool + refill stays
   * within `maxPrefetchAmount`; nothing when retiring or closed. Only for an unbounded (unlimited)
   * throttler: where the quota binds, asking early would change when a client's class is
   * backlogged at the controller, which the class shares depend on.
   */
  private refillAhead(): void {
    if (this.closedWith || this.retiring || this.retryPending) return;
    this.sizer.update(this.clock.now());
    if (this.available * 2 >= this.sizer.prefetchAmount) return;
    const amount = Math.min(this.sizer.prefetchAmount, this.config.maxPrefetchAmount - this.available);
    if (amount > TOLERANCE) this.refill(amount);
  }

  private refill(amount: number): void {
    this.inFlight += amount;
    this.refills += 1;
    this.sizer.recordRefill(this.clock.now(), amount);
    const waitingBefore = this.arrivals;
    this.remote.acquire(amount, this.lifetime.signal).then(
      () => this.onRefilled(amount),
      (error: unknown) => this.onRefillFailed(amount, waitingBefore, error),
    );
  }

  private onRefilled(amount: number): void {
    this.inFlight = settleToZero(this.inFlight - amount);
    this.refillFailing = false;
    if (this.closedWith) {
      // What was lent before the close is paid first; only the rest goes back.
      const repaid = Math.min(amount, Math.max(0, -this.available));
      this.available = settleToZero(this.available + repaid);
      this.giveToRemote(amount - repaid);
      return;
    }
    const demandOutranPool = this.liveQueued > 0;
    this.available += amount;
    this.satisfy();
    this.returnExcess();
    if (demandOutranPool && this.inFlight === 0 && this.liveQueued === 0 && !this.retiring) {
      // Keep one refill queued while callers outrun the pool. Otherwise the controller sees this
      // client's class go idle between refills (for the time it takes to use up the pool) and, since
      // an idle class banks no credit, a busy class would get less than its weight.
      this.sizer.update(this.clock.now(), true);
      this.refill(this.sizer.prefetchAmount);
      return;
    }
    this.requestIfNeeded();
  }

  /**
   * Keeps the pool within its bound once a refill landed and waiting callers took theirs. The refill
   * kept queued while callers outrun the pool is sized before anyone knows whether the burst goes on
   * (sizing it to the room left doubled the refills: the pool is nearly full whenever it is sent),
   * so a burst that ends as it lands leaves it on top of the leftover; that excess goes back at once,
   * for other clients. Not excess: what callers still wait for (a head request larger than the bound
   * must be able to collect its amount), and what a failed tryAcquire stocked up for (else a try for
   * more than the bound could never succeed). The bound is the one in force at landing; a limit change
   * that resizes it rebuilds the client, and the retired one returns its whole pool.
   */
  private returnExcess(): void {
    if (this.closedWith || !this.remote.release) return;
    const stockedUp = this.clock.now() - this.stockedUpAt <= 1000 / this.config.targetRps ? this.stockedUpFor : 0;
    const room = Math.max(this.config.maxPrefetchAmount, this.queuedAmount + stockedUp);
    // Within float residue of the bound is not worth a release call.
    if (fits(this.available, room)) return;
    const excess = this.available - room;
    this.available = room;
    this.giveToRemote(excess);
  }

  /** `waitingBefore`: callers with a smaller arrival number were waiting when the refill was sent. */
  private onRefillFailed(amount: number, waitingBefore: number, thrown: unknown): void {
    this.inFlight = settleToZero(this.inFlight - amount);
    if (this.closedWith) return;
    this.refillFailures += 1;
    this.refillFailing = true;
    const error = asSluiceError(thrown, (message) => new SluiceError("CONTROLLER_UNAVAILABLE", `${this.name}: ${message}`));
    if (error.retriable) {
      // What was lent is asked for again with the retry (the pool below 0 counts as demand).
      this.retryLater();
      return;
    }
    // The retry budget is spent: what was lent is written off (the throttler is unlimited, nobody
    // else was short of it) rather than asked for again and again with no caller waiting for it.
    if (this.available < 0 && this.inFlight === 0) this.available = 0;
    // Final error: the retry budget of this refill is spent, and with it the wait of every caller
    // that was already waiting when it was sent. Fail those, from the back, until the refills still
    // in flight cover the rest; a caller that came later has not waited its own budget yet.
    for (let i = this.queue.length - 1; i >= this.queueHead; i--) {
      if (fits(this.queuedAmount, this.available + this.inFlight)) break;
      const request = this.queue[i];
      if (!request || request.settled || request.seq >= waitingBefore) continue;
      request.settled = true;
      this.liveQueued -= 1;
      this.queuedAmount = this.liveQueued === 0 ? 0 : this.queuedAmount - request.amount;
      request.reject(error);
    }
    // A failed head may have blocked smaller callers the pool covers; the rest get a refill of their own.
    this.satisfy();
    this.requestIfNeeded();
  }

  private retryLater(): void {
    if (this.retryPending) return;
    this.retryPending = true;
    this.clock.sleep(this.config.retryDelayMs ?? 1000, this.lifetime.signal).then(
      () => {
        this.retryPending = false;
        this.requestIfNeeded();
      },
      () => {
        this.retryPending = false;
      },
    );
  }

  private maybeFinishRetiring(): void {
    if (this.retiring && this.liveQueued === 0 && this.inFlight === 0 && !this.closedWith) {
      this.close("retired after reconfiguration");
    }
  }

  private giveBack(): void {
    // A pool below 0 (lent ahead of refills in flight) stays so: those refills pay it when they land.
    const pool = Math.max(0, this.available);
    this.available -= pool;
    this.giveToRemote(pool);
  }

  private giveToRemote(amount: number): void {
    if (amount <= 0 || !this.remote.release) return;
    this.returned += amount;
    void this.remote.release(amount);
  }
}
