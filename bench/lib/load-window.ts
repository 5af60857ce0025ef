// A load generator's measured window: fixed in advance (a full run), or gated (quick mode), where
// the parent opens and closes it by `window` commands while the load runs, so that a call counted
// before the close command arrived may still fall after the window's end (bench/children/
// quota-load-process.ts, LoadRun.gated).

/** When calls count and when the load stops (epoch ms; +Infinity while a gated run's is unknown). */
export interface WindowBounds {
  readonly windowFrom: number;
  readonly windowTo: number;
  readonly stopAt: number;
}

/** A gated run's values whose time (answer, or planned send) fell before the window's end, known only once it closed. */
export function before<T>(values: readonly T[], times: readonly number[], end: number): T[] {
  return values.filter((_, i) => (times[i] ?? end) < end);
}
