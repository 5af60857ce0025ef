/**
 * The time port. Everything below an entry point takes a Clock instead of calling `Date.now` or
 * `setTimeout`, so algorithms can be tested in virtual time (see ManualClock).
 * Times are milliseconds; `now()` is monotone for a given clock.
 */
export interface Clock {
  now(): number;
  /** Resolves after `ms` milliseconds; rejects with the signal's reason if aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The real clock: wall time in milliseconds, timers from the event loop. */
export const systemClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, Math.max(0, ms));
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
};
