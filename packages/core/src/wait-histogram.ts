/**
 * A cumulative histogram of waits in milliseconds with Prometheus-style upper bounds, plus the max.
 * Sensors of the reference system record `wait_time` as a timer; this is its equivalent.
 */
export const WAIT_BUCKETS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000] as const;

export interface WaitHistogramView {
  readonly count: number;
  readonly sumMs: number;
  readonly maxMs: number;
  /** Cumulative counts per upper bound of WAIT_BUCKETS_MS (the +Inf bucket is `count`). */
  readonly buckets: readonly number[];
}

export class WaitHistogram {
  private count = 0;
  private sumMs = 0;
  private maxMs = 0;
  private readonly perBucket = new Array<number>(WAIT_BUCKETS_MS.length).fill(0);

  record(waitMs: number): void {
    this.count += 1;
    this.sumMs += waitMs;
    if (waitMs > this.maxMs) this.maxMs = waitMs;
    const index = WAIT_BUCKETS_MS.findIndex((bound) => waitMs <= bound);
    if (index >= 0) this.perBucket[index] = (this.perBucket[index] ?? 0) + 1;
  }

  view(): WaitHistogramView {
    let running = 0;
    const buckets = this.perBucket.map((n) => (running += n));
    return { count: this.count, sumMs: this.sumMs, maxMs: this.maxMs, buckets };
  }
}
