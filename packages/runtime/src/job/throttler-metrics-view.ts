/** Worker sensors of one throttler as used by one computation (the reference's worker sensors). */
export interface ThrottlerMetricsView {
  readonly computation: string;
  readonly throttlerId: string;
  readonly consumed: number;
  readonly released: number;
  readonly waitCount: number;
  readonly waitSumMs: number;
  readonly waitMaxMs: number;
  readonly rpcCount: number;
  readonly rpcFailures: number;
}
