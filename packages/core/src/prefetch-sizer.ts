import { TOLERANCE } from "./prefetch-amounts.ts";

export interface PrefetchSizing {
  /** Refill RPCs per second to steer toward: 1 / request_period. */
  readonly targetRps: number;
  readonly minPrefetchAmount: number;
  readonly maxPrefetchAmount: number;
  /** Refills older than this no longer count when sizing the next one. */
  readonly windowMs: number;
  /**
   * The throttler is unlimited: no other client can be short of quota because this one asked for
   * much, so a young client sizes its refills by the rate it was granted at so far, not by doubling.
   */
  readonly unbounded?: boolean;
}

/**
 * The shortest time over which an unbounded client's young rate is measured: a few round trips,
 * so that two refills sent back to back do not extrapolate to an absurd rate.
 */
export const UNBOUNDED_MIN_SPAN_MS = 20;

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
    // An unbounded client measures over at least UNBOUNDED_MIN_SPAN_MS instead: each doubling cost
    // its callers a round trip (~15 of them before a busy job's pool reached its steady size, half
    // a second of waiting on a loaded machine), and since the quota never binds, a refill that
    // overshoots costs nobody anything (what is left goes back when the client closes).
    const floorMs = this.sizing.unbounded === true ? Math.min(UNBOUNDED_MIN_SPAN_MS, 1000 / targetRps) : 1000 / targetRps;
    const spanMs = Math.min(windowMs, Math.max(now - oldest.at, floorMs));
    const observedRps = count / (spanMs / 1000);
    // Whole units, like the reference's integer amounts: fractional refills only add float residue.
    const next = Math.ceil(((this.windowAmount / count) * observedRps) / targetRps - TOLERANCE);
    this.amount = Math.min(maxPrefetchAmount, Math.max(minPrefetchAmount, next));
  }
}
