import { WaitHistogram, type WaitHistogramView } from "@sluice/core";

export interface ThrottlerHandleMetrics {
  readonly throttlerId: string;
  /** Units handed to callers (the reference's worker sensor `consumed`). */
  readonly consumed: number;
  readonly released: number;
  /** Prefetched units the client handed back to the controller: a pool's excess, or the pool on close. */
  readonly returned: number;
  /** Time callers waited in throttle() when the local pool could not answer at once. */
  readonly waitTime: WaitHistogramView;
  readonly rpcCount: number;
  readonly rpcFailures: number;
}

/**
 * The worker sensors of one throttler handle (the reference's TMetricsTrackingThrottler): running
 * counters and the wait histogram. `absorb` folds another's into these, so a worker can keep one
 * total per throttler for the jobs it stopped instead of every stopped job's figures.
 */
export class ThrottlerMeters {
  consumed = 0;
  released = 0;
  returned = 0;
  rpcCount = 0;
  rpcFailures = 0;
  readonly waits = new WaitHistogram();

  absorb(other: ThrottlerMeters): void {
    this.consumed += other.consumed;
    this.released += other.released;
    this.returned += other.returned;
    this.rpcCount += other.rpcCount;
    this.rpcFailures += other.rpcFailures;
    this.waits.absorb(other.waits);
  }

  view(throttlerId: string, now: number): ThrottlerHandleMetrics {
    return {
      throttlerId,
      consumed: this.consumed,
      released: this.released,
      returned: this.returned,
      waitTime: this.waits.view(now),
      rpcCount: this.rpcCount,
      rpcFailures: this.rpcFailures,
    };
  }
}
