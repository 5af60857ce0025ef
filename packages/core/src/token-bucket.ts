/**
 * The token bucket of one throttler (docs/design.md §9.1), a pure value: every method takes `now` in ms.
 *
 * - Rate `limit` units/s, capacity `limit × period`, starts full. `limit: null` is unlimited.
 * - Pay-after: a grant of any size is allowed while the balance is non-negative (`canGrant`, for
 *   requests that queued) or positive (`canGrantWithoutQueue`, for a request granted the instant it
 *   arrives to an empty queue); the balance may then go negative and the debt delays later grants.
 *   The two rules differ exactly when the balance is 0, which happens whenever grants used the
 *   balance up to the last token (a full bucket of 100 taken by 100 requests of 1), so the caller
 *   must say which applies.
 * - Limit 0 grants nothing.
 */
export interface TokenBucketConfig {
  /** Units per second; null = unlimited. */
  readonly limit: number | null;
  readonly periodMs: number;
}

/** Float slack so a wake-up computed for "balance reaches 0" is not missed by rounding. */
const EPSILON = 1e-9;

export class TokenBucket {
  readonly kind = "rate";
  // The config's figures are kept as fields of the bucket itself, not as the config object: a grant
  // reads them, and a controller with thousands of keys' buckets touches one object per bucket less.
  private limitPerS: number | null;
  // The numbers a grant writes start as numbers, not `undefined` (a field declared without a value
  // is defined as undefined first): a field that once held undefined stores each new number as an
  // object of its own, and for a long-lived bucket every such write is young garbage the collector
  // must trace from the old bucket.
  private period = 0;
  /** capacityOf(config), worked out when the config is set. */
  private cap = 0;
  private balance = 0;
  private updatedAt = 0;

  constructor(config: TokenBucketConfig, now: number) {
    this.limitPerS = config.limit;
    this.period = config.periodMs;
    this.cap = capacityOf(config);
    this.balance = this.cap;
    this.updatedAt = now;
  }

  get limit(): number | null {
    return this.limitPerS;
  }

  get periodMs(): number {
    return this.period;
  }

  /** Largest balance (and burst): `limit × period`; Infinity when unlimited. */
  get capacity(): number {
    return this.cap;
  }

  balanceAt(now: number): number {
    this.refill(now);
    return this.balance;
  }

  /** Whether a grant of any size may be made now (pay-after). */
  canGrant(now: number): boolean {
    const limit = this.limitPerS;
    if (limit === null) return true;
    if (limit === 0) return false;
    this.refill(now);
    return this.balance >= -EPSILON * Math.max(1, limit);
  }

  /** Whether a caller that does not queue may take quota now: only while the balance is positive. */
  canGrantWithoutQueue(now: number): boolean {
    const limit = this.limitPerS;
    if (limit === null) return true;
    if (limit === 0) return false;
    this.refill(now);
    return this.balance > 0;
  }

  /** Pay-after: any amount may be taken once canGrant holds (ConcurrencyUnits, by contrast, needs room). */
  canTake(_amount: number, _now: number): boolean {
    return true;
  }

  /** Units held now: a token bucket does not know (tokens are spent, not held). */
  get inUse(): null {
    return null;
  }

  /** Takes `amount` tokens; the balance may go negative (pay-after). */
  take(amount: number, now: number): void {
    if (this.limitPerS === null) return;
    this.refill(now);
    this.balance -= amount;
  }

  /** Returns tokens. Unlike the reference, the balance never rises above capacity. */
  release(amount: number, now: number): void {
    if (this.limitPerS === null) return;
    this.refill(now);
    this.balance = Math.min(this.capacity, this.balance + amount);
  }

  /**
   * Sets the balance another bucket had at `atMs` (a controller's persisted state, docs/design.md §5.2) and
   * refills from then to `now`, so a restarted bucket is never fuller than what was persisted plus
   * what accrued since. The balance is clamped to this bucket's capacity; debt is kept. A no-op when
   * unlimited (an unlimited bucket has no balance worth keeping).
   */
  restore(balance: number, atMs: number, now: number): void {
    if (this.limitPerS === null || !Number.isFinite(balance)) return;
    this.balance = Math.min(this.capacity, balance);
    this.updatedAt = Math.min(atMs, now);
    this.refill(now);
  }

  /** Milliseconds until `canGrant` holds: 0 if now, null if never (limit 0). */
  msUntilGrantable(now: number): number | null {
    const limit = this.limitPerS;
    if (limit === null) return 0;
    if (limit === 0) return null;
    if (this.canGrant(now)) return 0;
    return (-this.balance * 1000) / limit;
  }

  /**
   * Applies a new limit and period. Tokens accrued so far at the old rate are kept (clamped to the
   * new capacity); leaving "unlimited" starts full, as a new bucket does; limit 0 keeps any debt.
   */
  reconfigure(config: TokenBucketConfig, now: number): void {
    this.refill(now);
    const wasUnlimited = this.limitPerS === null;
    this.limitPerS = config.limit;
    this.period = config.periodMs;
    this.cap = capacityOf(config);
    if (config.limit === null) {
      this.balance = 0;
    } else if (wasUnlimited) {
      this.balance = this.capacity;
    } else {
      this.balance = Math.min(this.balance, this.capacity);
    }
    this.updatedAt = now;
  }

  private refill(now: number): void {
    const limit = this.limitPerS;
    if (now <= this.updatedAt) return;
    if (limit !== null && limit > 0 && this.balance < this.capacity) {
      this.balance = Math.min(this.capacity, this.balance + ((now - this.updatedAt) * limit) / 1000);
    }
    this.updatedAt = now;
  }
}

function capacityOf(config: TokenBucketConfig): number {
  if (config.limit === null) return Number.POSITIVE_INFINITY;
  return (config.limit * config.periodMs) / 1000;
}
