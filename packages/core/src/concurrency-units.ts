/**
 * The unit source of a concurrency throttler (docs/design.md §11.2), a pure value beside TokenBucket and with
 * the same methods, so QuotaBucket's queue machinery (classes, lag order, chunking, deadlines,
 * request ids) drives either: `limit` units may be in use at once; a grant takes units, `release`
 * gives them back. Nothing refills with time — a waiter is woken by a release (or a raised limit).
 *
 * Unlike the token bucket there is no pay-after: a grant needs room for its whole chunk, because a
 * unit in use is a task running on the protected system, and admitting one beyond the limit is
 * exactly what the throttler exists to prevent. `limit: null` is unlimited; lowering the limit below
 * what is in use takes effect as units come back.
 */
export class ConcurrencyUnits {
  readonly kind = "concurrency";
  private currentLimit: number | null;
  private used = 0;

  constructor(limit: number | null) {
    this.currentLimit = limit;
  }

  get limit(): number | null {
    return this.currentLimit;
  }

  /** Units held now. */
  get inUse(): number {
    return this.used;
  }

  /** The limit; Infinity when unlimited (what "capacity" means for a token bucket). */
  get capacity(): number {
    return this.currentLimit ?? Number.POSITIVE_INFINITY;
  }

  /** Units free now (negative while a lowered limit is above what is in use). */
  balanceAt(_now: number): number {
    return this.capacity - this.used;
  }

  /** Whether some grant may be made now (the chunk itself is checked by canTake). */
  canGrant(_now: number): boolean {
    return this.currentLimit === null || this.used < this.currentLimit;
  }

  canGrantWithoutQueue(now: number): boolean {
    return this.canGrant(now);
  }

  /** Whether `amount` more units fit under the limit. */
  canTake(amount: number, _now: number): boolean {
    return this.currentLimit === null || this.used + amount <= this.currentLimit;
  }

  take(amount: number, _now: number): void {
    this.used += amount;
  }

  /** Gives units back; never below zero (a release for units already expired is not an error). */
  release(amount: number, _now: number): void {
    this.used = Math.max(0, this.used - amount);
  }

  /**
   * Always null: time alone never frees a unit, and the bucket drains at once on every submit,
   * release and reconfiguration, so there is never a reason to wake up for units.
   */
  msUntilGrantable(_now: number): number | null {
    return null;
  }

  /** `periodMs` is ignored: a concurrency throttler has no window (validation refuses `period`). */
  reconfigure(config: { readonly limit: number | null }, _now: number): void {
    this.currentLimit = config.limit;
  }
}
