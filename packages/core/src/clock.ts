/**
 * The time port. Everything below an entry point takes a Clock instead of calling `Date.now` or
 * `setTimeout`, so algorithms can be tested in virtual time (see ManualClock).
 * Times are milliseconds; `now()` is monotone for a given clock.
 */
export interface Clock {
  now(): number;
  /** Resolves after `ms` milliseconds; rejects with the signal's reason if aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Optional: calls `fire` once, `ms` from now, and returns what cancels it. No promise and no abort
   * listener: for a hot path that arms a timer on every event-loop wake-up (SharedWakeups), where a
   * `sleep` — a promise, its closures, an abort listener added and removed — cost ~40 µs of CPU per
   * wake-up on a cold event loop (a 12.5 ms timer chain on the shared 2-core VM). Without it, callers
   * fall back to `sleep`.
   */
  setTimer?(ms: number, fire: () => void): () => void;
  /**
   * Optional: calls `fire` once the current turn of the event loop is over (after the callbacks and
   * promise continuations it runs): `setImmediate` on the system clock. How late it comes bounds how
   * long what a callback set off synchronously took to happen — a smooth client uses it to see how
   * late its callers' calls may have left when the process stalled after handing units out
   * (DispatchWindow). Without it, that delay is taken as 0.
   */
  afterTurn?(fire: () => void): void;
}

/**
 * The longest delay `setTimeout` takes (2^31 − 1 ms, about 24.8 days). Node fires a longer one after
 * 1 ms, with a warning, so an unbounded wait (a deadline weeks away, a debt at a tiny limit) would spin.
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** Read once: `performance.timeOrigin` is a getter that costs more than `performance.now()` itself. */
const TIME_ORIGIN = performance.timeOrigin;

/** The real clock: wall time in milliseconds, timers from the event loop. */
export const systemClock: Clock = {
  now: () => TIME_ORIGIN + performance.now(),
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      // Longer than one timer can wait: wait in steps of at most MAX_TIMER_DELAY_MS and re-arm.
      const arm = (left: number) => {
        const step = Math.min(left, MAX_TIMER_DELAY_MS);
        timer = setTimeout(() => {
          const rest = left - step;
          if (rest > 0) {
            arm(rest);
            return;
          }
          signal?.removeEventListener("abort", onAbort);
          resolve();
        }, step);
      };
      arm(ms > 0 ? ms : 0); // NaN and negative delays are "now"
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
  setTimer(ms, fire) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    // Longer than one timer can wait: re-arm in steps, as `sleep` does.
    const arm = (left: number) => {
      const step = Math.min(left, MAX_TIMER_DELAY_MS);
      timer = setTimeout(step < left ? () => arm(left - step) : fire, step);
    };
    arm(ms > 0 ? ms : 0); // NaN and negative delays are "now"
    return () => clearTimeout(timer);
  },
  afterTurn(fire) {
    setImmediate(fire);
  },
};
