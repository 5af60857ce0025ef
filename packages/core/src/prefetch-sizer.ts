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
  /** The client's class's share of the class weights, read at each refill (see CONTENDED_STEP_FRACTION); 1 when absent. */
  readonly classWeightShare?: () => number;
}

/**
 * The shortest time over which an unbounded client's young rate is measured: a few round trips,
 * so that two refills sent back to back do not extrapolate to an absurd rate.
 */
export const UNBOUNDED_MIN_SPAN_MS = 20;

/**
 * While callers wait for quota, a refill asks for this fraction of `maxPrefetchAmount` more than the
 * rate it was granted at. Rate matching alone scales every backlogged client's refill by the same
 * factor each round, so clients of one class at one lag timestamp (served in arrival order, one refill
 * each per round) kept whatever ratio the start left: a client that joined 1.5 s after two others got
 * 5 % of the rate for good (virtual time, limit 200/s, request_period 200 ms). An additive step on top
 * of a multiplicative match shrinks the differences every round (additive increase: Chiu and Jain),
 * so shares converge to equal. The cost: refills up to a quarter of the bound larger than the matched
 * size. Measured in virtual time (two clients joining one that had the bucket to itself for 2.2 s),
 * their share of the next 4.3 s: 7 % of an equal share with no step, 60 % of an equal share with 1/8, 68 % with 1/4;
 * 14 s after a 1.5 s late start, within 4 % of equal with 1/4.
 *
 * The step is scaled by the client's class's share of the class weights: clients of one class get
 * the same step (so they still converge), and a light class's refills stay in proportion to its
 * rate. An unscaled step made a class of weight 1 in 5:3:1 get refills several times its rate per
 * request_period, its units came in lumps, and its consumption over 12 s windows read 11.6 % for
 * 11.1 % (the controller's grants were exact); scaled, it reads like no step at all.
 */
export const CONTENDED_STEP_FRACTION = 1 / 4;

/**
 * Sizes a prefetching client's next refill from the refills in a sliding window: the average amount
 * scaled by how far the observed refill rate is from the target, clamped to [min, max] (the
 * reference's UpdatePrefetch).
 */
export class PrefetchSizer {
  private readonly window: { at: number; amount: number }[] = [];
  private windowAmount = 0;
  private amount: number;
  /** What rounding the last bounded refill sizes to whole units left over, in units (|carry| < 1). */
  private roundingCarry = 0;

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

  /** `callersWait`: the refill about to be sent is for callers already waiting (see CONTENDED_STEP_FRACTION). */
  update(now: number, callersWait = false): void {
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
    // An unbounded client measures over at least UNBOUNDED_MIN_SPAN_MS instead: each doubling costs
    // its callers a round trip, and since the quota never binds, a refill that overshoots costs
    // nobody anything (what is left goes back when the client closes).
    const floorMs = this.sizing.unbounded === true ? Math.min(UNBOUNDED_MIN_SPAN_MS, 1000 / targetRps) : 1000 / targetRps;
    const spanMs = Math.min(windowMs, Math.max(now - oldest.at, floorMs));
    const observedRps = count / (spanMs / 1000);
    const matched = ((this.windowAmount / count) * observedRps) / targetRps;
    if (!callersWait || this.sizing.unbounded === true) {
      // Whole units, like the reference's integer amounts: fractional refills only add float residue.
      // No step when nobody waits (nothing says demand outruns supply), nor when the throttler is
      // unlimited (no one else is short of quota, so there is no share to even out).
      this.amount = clamp(Math.ceil(matched - TOLERANCE), minPrefetchAmount, maxPrefetchAmount);
      return;
    }
    // Whole units too, but rounded with the remainder carried to the next refill: a plain ceil makes
    // every size in a band about 1/step wide a fixed point of this rule (sizes 15 and 17 both stood
    // still side by side, a 12 % difference in share for good), while a carried remainder makes the
    // refills average the exact size, so the shares keep converging.
    const share = this.sizing.classWeightShare?.() ?? 1;
    const step = maxPrefetchAmount * CONTENDED_STEP_FRACTION * (share > 0 && share <= 1 ? share : 1);
    const exact = clamp(matched + step, minPrefetchAmount, maxPrefetchAmount);
    const rounded = clamp(Math.round(exact + this.roundingCarry), minPrefetchAmount, maxPrefetchAmount);
    this.roundingCarry = Math.abs(exact + this.roundingCarry - rounded) < 1 ? exact + this.roundingCarry - rounded : 0;
    this.amount = rounded;
  }
}

const clamp = (value: number, min: number, max: number): number => Math.min(max, Math.max(min, value));
