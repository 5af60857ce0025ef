import { SlidingMax } from "./sliding-max.ts";

/**
 * A cumulative histogram of waits in milliseconds with Prometheus-style upper bounds, plus the
 * longest recent wait. Sensors of the reference system record `wait_time` as a timer; this is its
 * equivalent.
 */
export const WAIT_BUCKETS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000] as const;

/**
 * `maxMs` is the longest wait of the last minute (to within 10 s), like the reference's
 * `wait_time.max`, not of all time: one bad moment at start would otherwise hide every later one. A
 * minute, so that a Prometheus scraping every 15–60 s sees every peak at least once.
 */
export const RECENT_MAX_WINDOW_MS = 60_000;
const RECENT_MAX_SLOT_MS = 10_000;

export interface WaitHistogramView {
  readonly count: number;
  readonly sumMs: number;
  /** The longest wait recorded in the last RECENT_MAX_WINDOW_MS (within one 10 s slot); 0 if none. */
  readonly maxMs: number;
  /** Cumulative counts per upper bound of WAIT_BUCKETS_MS (the +Inf bucket is `count`). */
  readonly buckets: readonly number[];
}

export class WaitHistogram {
  private count = 0;
  private sumMs = 0;
  /**
   * Waits in the first bucket (≤ 1 ms), counted here rather than in `perBucket`: most grants wait 0 ms,
   * and recording one then touches this object alone (a controller records two per grant, for each
   * of thousands of keys' buckets, whose state is not in cache).
   */
  private withinFirst = 0;
  private readonly recentMax = new SlidingMax(RECENT_MAX_WINDOW_MS, RECENT_MAX_SLOT_MS);
  /** Waits per bucket past the first (index 0 stays 0: see `withinFirst`). */
  private readonly perBucket = new Array<number>(WAIT_BUCKETS_MS.length).fill(0);

  /** A wait of `waitMs` that ended at `now` (ms on the caller's clock). */
  record(waitMs: number, now: number): void {
    this.count += 1;
    // A wait of 0 adds nothing to the sum, and never raises the recent maximum (max() is 0 over no
    // slots): most grants skip both.
    if (waitMs === 0) {
      this.withinFirst += 1;
      return;
    }
    this.sumMs += waitMs;
    if (waitMs > 0) this.recentMax.record(waitMs, now);
    if (waitMs <= (WAIT_BUCKETS_MS[0] as number)) {
      this.withinFirst += 1;
      return;
    }
    // A loop, not findIndex: this runs per grant.
    for (let index = 1; index < WAIT_BUCKETS_MS.length; index++) {
      if (waitMs <= (WAIT_BUCKETS_MS[index] as number)) {
        this.perBucket[index] = (this.perBucket[index] ?? 0) + 1;
        return;
      }
    }
  }

  view(now: number): WaitHistogramView {
    let running = this.withinFirst;
    const buckets = this.perBucket.map((n) => (running += n));
    return { count: this.count, sumMs: this.sumMs, maxMs: this.recentMax.max(now), buckets };
  }

  /** Adds every wait `other` recorded to this one (a finished job's waits into a running total). */
  absorb(other: WaitHistogram): void {
    this.count += other.count;
    this.sumMs += other.sumMs;
    this.withinFirst += other.withinFirst;
    this.recentMax.absorb(other.recentMax);
    for (let i = 0; i < this.perBucket.length; i++) this.perBucket[i] = (this.perBucket[i] ?? 0) + (other.perBucket[i] ?? 0);
  }
}
