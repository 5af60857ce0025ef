/** What user code and the job loop hold: one named throttler, wherever its quota comes from. */
export interface ThrottleOptions {
  /** Aborting removes the waiting request and returns any quota it held. */
  readonly signal?: AbortSignal;
}

export interface Throttler {
  /** Resolves once `amount` units are granted; rejects with a SluiceError. */
  throttle(amount: number, options?: ThrottleOptions): Promise<void>;
  /** Takes `amount` at once if it is available without waiting; never queues. */
  tryAcquire(amount: number): boolean;
  /** Gives back quota taken but not used. */
  release(amount: number): void;
}

/**
 * A throttler handle that may be keyed (docs/design.md §11.4): `forKey(key)` is a handle on one key's own
 * bucket; on a throttler that is not keyed it fails naming the throttler.
 */
export interface KeyableThrottler extends Throttler {
  forKey(key: string): Throttler;
}

/** Shared settled promise for the fast path: awaiting it costs one microtask and no allocation. */
export const RESOLVED: Promise<void> = Promise.resolve();
