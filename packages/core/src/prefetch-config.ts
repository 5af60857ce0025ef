// What a prefetching client (PrefetchingThrottler) is built from and reports: its remote, its pool
// sizing and its stats.

/** Where a prefetching client gets its quota from: the controller, over some transport. */
export interface QuotaRemote {
  /** Resolves once `amount` was granted in full; rejects with a SluiceError. */
  acquire(amount: number, signal: AbortSignal): Promise<void>;
  /**
   * Gives unused quota back: the pool when the client closes, and what a landing refill brings
   * above the pool's bound. Without it, that quota stays in the pool (there is nowhere to return it).
   */
  release?(amount: number): void | Promise<void>;
}

/** How the local pool is sized (the reference's TPrefetchingThrottlerConfig, ytflow.md §2.1). */
export interface PrefetchConfig {
  /** Refill RPCs per second to steer toward: 1 / request_period. */
  readonly targetRps: number;
  readonly minPrefetchAmount: number;
  /**
   * `ceil(limit × request_period)`: the largest refill, and the most quota the pool holds once
   * waiting callers took theirs (more comes back to the remote at once).
   */
  readonly maxPrefetchAmount: number;
  /** Refills older than this no longer count when sizing the next one. */
  readonly windowMs: number;
  /** Pause before asking again after a refill failed with a retriable error. */
  readonly retryDelayMs?: number;
  /**
   * The throttler is unlimited: a young client sizes refills by its rate so far (see PrefetchSizing),
   * refills ahead, and lends callers what its refills in flight will bring (see PrefetchingThrottler).
   */
  readonly unbounded?: boolean;
  /**
   * This client's class's share of the throttler's class weights (0–1], read at each refill: the
   * contended step of PrefetchSizer is scaled by it. 1 (the default) with no classes.
   */
  readonly classWeightShare?: () => number;
}

export interface PrefetchStats {
  /** The pool; below 0 when an unbounded client lent callers what its refills in flight will bring. */
  readonly available: number;
  readonly inFlight: number;
  readonly queuedRequests: number;
  readonly queuedAmount: number;
  readonly prefetchAmount: number;
  readonly refills: number;
  readonly refillFailures: number;
  /** Units given back to the remote: excess over the pool's bound when refills landed, and the pool on close. */
  readonly returned: number;
}
