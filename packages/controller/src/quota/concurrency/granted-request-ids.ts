import { SluiceError } from "@sluice/core";

// The request ids a concurrency throttler has leased units for (docs/design.md §11.2: request ids apply as
// for rate throttlers). A client that lost an answer, or replays after a failover, sends the same
// request id again; it must get the same grant back without a second lease. The bucket remembers
// its own grants for detachedGraceMs too, but it answers a replay without telling its caller that it
// was one, so the lease side would count the units twice: the controller answers concurrency
// replays from here, before the bucket, and remembers at least as long as the bucket does.

export interface GrantedRequest {
  readonly throttlerId: string;
  readonly requestId: string;
  readonly clientId: string;
  readonly amount: number;
  readonly waitedMs: number;
  /** Clock ms after which a retry with this id is a new request. */
  readonly expiresAt: number;
  /** The lease that took the units (LeaseTable ids): once it ended, a replay has nothing to be answered from. */
  readonly leaseId: number;
}

export class GrantedRequestIds {
  /**
   * Keyed by throttler and id. Every entry is remembered for the same time after its grant, so the
   * Map's insertion order is expiry order and forgetting looks only at the oldest.
   */
  private readonly byKey = new Map<string, GrantedRequest>();
  /** The same entries by throttler, then request id, in the same order: one throttler's ids without a walk of all. */
  private readonly byThrottler = new Map<string, Map<string, GrantedRequest>>();

  /** `forgotten` hears of each throttler one of whose ids is forgotten (what a successor would be told changes). */
  constructor(private readonly forgotten: (throttlerId: string) => void = () => {}) {}

  get size(): number {
    return this.byKey.size;
  }

  /** The earlier grant of `requestId`, or undefined; refuses the same id sent for another amount. */
  replayOf(throttlerId: string, requestId: string, amount: number, now: number): GrantedRequest | undefined {
    if (requestId === "") return undefined;
    this.forgetExpired(now);
    const earlier = this.byKey.get(keyOf(throttlerId, requestId));
    if (!earlier) return undefined;
    if (earlier.amount !== amount) {
      throw new SluiceError(
        "INVALID_REQUEST",
        `request "${requestId}" on throttler "${throttlerId}" was sent for amount ${earlier.amount} and now for ${amount}; ` +
          `a request id names one request (a retry sends the same amount): use a new id for a new request`,
        { throttlerId, amount, earlierAmount: earlier.amount },
      );
    }
    return earlier;
  }

  /** Records a grant; returns false when the id was already granted (a joined retry: not a new lease). */
  remember(grant: GrantedRequest, now: number): boolean {
    if (grant.requestId === "") return true;
    this.forgetExpired(now);
    const key = keyOf(grant.throttlerId, grant.requestId);
    if (this.byKey.has(key)) return false;
    this.byKey.set(key, grant);
    let ofThrottler = this.byThrottler.get(grant.throttlerId);
    if (!ofThrottler) this.byThrottler.set(grant.throttlerId, (ofThrottler = new Map()));
    ofThrottler.set(grant.requestId, grant);
    return true;
  }

  /** Every id still remembered, oldest first (persisted for a successor, docs/design.md §5.2). */
  live(now: number): GrantedRequest[] {
    this.forgetExpired(now);
    return [...this.byKey.values()];
  }

  /** The ids of one throttler still remembered, oldest first (live() of that throttler, after forgetExpired). */
  ofThrottler(throttlerId: string): Iterable<GrantedRequest> {
    return this.byThrottler.get(throttlerId)?.values() ?? [];
  }

  /** Forgets one id (its lease ended: a retry of it must lease units again). */
  drop(throttlerId: string, requestId: string): void {
    const grant = this.byKey.get(keyOf(throttlerId, requestId));
    if (grant) this.delete(grant);
  }

  /** A throttler removed or no longer of kind concurrency. */
  forget(throttlerId: string): void {
    for (const grant of [...this.ofThrottler(throttlerId)]) this.delete(grant);
  }

  /** Forgets the ids remembered until `now` or earlier (the oldest first, up to the first live one). */
  forgetExpired(now: number): void {
    for (const grant of this.byKey.values()) {
      if (grant.expiresAt > now) return;
      this.delete(grant);
    }
  }

  private delete(grant: GrantedRequest): void {
    this.byKey.delete(keyOf(grant.throttlerId, grant.requestId));
    const ofThrottler = this.byThrottler.get(grant.throttlerId);
    ofThrottler?.delete(grant.requestId);
    if (ofThrottler?.size === 0) this.byThrottler.delete(grant.throttlerId);
    this.forgotten(grant.throttlerId);
  }
}

function keyOf(throttlerId: string, requestId: string): string {
  return `${throttlerId}\u0000${requestId}`;
}
