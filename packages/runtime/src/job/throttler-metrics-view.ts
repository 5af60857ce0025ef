import type { ThrottlerHandleMetrics } from "@sluice/client";

/** Worker sensors of one throttler as used by one computation (the reference's worker sensors). */
export interface ThrottlerMetricsView {
  readonly computation: string;
  readonly throttlerId: string;
  readonly consumed: number;
  readonly released: number;
  /** Prefetched units handed back to the controller (ReleaseQuota). */
  readonly returned: number;
  readonly waitCount: number;
  readonly waitSumMs: number;
  /** The longest wait of the last minute (core's RECENT_MAX_WINDOW_MS), not of all time. */
  readonly waitMaxMs: number;
  /** Cumulative counts of those waits per upper bound of WAIT_BUCKETS_MS (for a histogram on /metrics). */
  readonly waitBuckets: readonly number[];
  readonly rpcCount: number;
  readonly rpcFailures: number;
}

export function throttlerMetricsView(computation: string, m: ThrottlerHandleMetrics): ThrottlerMetricsView {
  return {
    computation,
    throttlerId: m.throttlerId,
    consumed: m.consumed,
    released: m.released,
    returned: m.returned,
    waitCount: m.waitTime.count,
    waitSumMs: m.waitTime.sumMs,
    waitMaxMs: m.waitTime.maxMs,
    waitBuckets: m.waitTime.buckets,
    rpcCount: m.rpcCount,
    rpcFailures: m.rpcFailures,
  };
}

/** Two views of the same computation and throttler at the same moment, as one. */
export function sumThrottlerMetrics(a: ThrottlerMetricsView, b: ThrottlerMetricsView): ThrottlerMetricsView {
  return {
    computation: a.computation,
    throttlerId: a.throttlerId,
    consumed: a.consumed + b.consumed,
    released: a.released + b.released,
    returned: a.returned + b.returned,
    waitCount: a.waitCount + b.waitCount,
    waitSumMs: a.waitSumMs + b.waitSumMs,
    waitMaxMs: Math.max(a.waitMaxMs, b.waitMaxMs),
    waitBuckets: a.waitBuckets.map((n, i) => n + (b.waitBuckets[i] ?? 0)),
    rpcCount: a.rpcCount + b.rpcCount,
    rpcFailures: a.rpcFailures + b.rpcFailures,
  };
}
