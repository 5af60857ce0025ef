import { TOLERANCE } from "./prefetch-amounts.ts";

export interface PrefetchSizing {
  /** Refill RPCs per second to steer toward: 1 / request_period. */
  readonly targetRps: number;
  readonly minPrefetchAmount: number;
  readonly maxPrefetchAmount: number;
  /** Refills older than this no longer count when sizing the next one. */
  readonly windowMs: number;
}

/**
 * Sizes a prefetching client's next refill from the refills in a sliding window: the average amount
 * scaled by how far the observed refill rate is from the target, clamped to [min, max] (the
 * reference's UpdatePrefetch).
 */
export class PrefetchSizer {
  private readonly window: { at: number; amount: number }[] = [];
  private windowAmount = 0;
  private amount: number;

  constructor(private readonly sizing: PrefetchSizing) {
    this.amount = sizing.minPrefetchAmount;
  }

  /** The size of the next refill. */
  get prefetchAmount(): number {
    return this.amount;
  }

  recordRefill(at: number, amount: number): void {
    this.window.push({ at, amount });
    this.windowAmount += amount;
  }

  update(now: number): void {
    const { windowMs, targetRps, minPrefetchAmount, maxPrefetchAmount } = this.sizing;
    while (this.window.length > 0 && (this.window[0]?.at ?? now) <= now - windowMs) {
      this.windowAmount -= this.window.shift()?.amount ?? 0;
    }
    const count = this.window.length;
    const oldest = this.window[0];
    if (count === 0 || oldest === undefined || this.windowAmount <= 0) return;
    // Improvement on the reference, which always divides by the whole window: a client younger than
    // its window measures its rate over the time it has existed (at least one request period), so a
    // busy new client reaches its steady refill size in a few refills instead of dozens.
    const spanMs = Math.min(windowMs, Math.max(now - oldest.at, 1000 / targetRps));
    const observedRps = count / (spanMs / 1000);
    // Whole units, like the reference's integer amounts: fractional refills only add float residue.
    const next = Math.ceil(((this.windowAmount / count) * observedRps) / targetRps - TOLERANCE);
    this.amount = Math.min(maxPrefetchAmount, Math.max(minPrefetchAmount, next));
  }
}
