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
  readonly waitMaxMs: number;
  /** Cumulative counts of those waits per upper bound of WAIT_BUCKETS_MS (for a histogram on /metrics). */
  readonly waitBuckets: readonly number[];
  readonly rpcCount: number;
  readonly rpcFailures: number;
}
