import { RateWindow, type QuotaBucketSnapshot } from "@sluice/core";

/** The span of "current granted rate" on dashboards. */
export const GRANTED_RATE_WINDOW_MS = 5_000;
/** How often the controller samples the counters; also the RateWindow's slot size. */
export const GRANTED_RATE_SAMPLE_MS = 250;

interface Series {
  lastGranted: number;
  readonly window: RateWindow;
}

/**
 * Observed granted units per second of each throttler and class over the last 5 s.
 *
 * Why sampling the buckets' cumulative `granted` counters rather than counting the results of
 * acquire(): the counters move once per granted chunk, exactly when the quota is handed out. A
 * request's promise resolves once, after its last chunk (a 600-unit request under max_grant_amount
 * 10 would show up as one spike a minute late), resolves for every joined duplicate of one request
 * id, and resolves again for a retry answered from the remembered grant — all of which would
 * misstate the rate. The controller samples every GRANTED_RATE_SAMPLE_MS and on every describe, so
 * each delta lands in the slot it happened in, give or take one sample.
 */
export class GrantedRates {
  private readonly throttlers = new Map<string, { total: Series; classes: Map<string, Series> }>();

  /** Starts a series for a new throttler, so its history before now is not counted as a burst. */
  track(snapshot: QuotaBucketSnapshot): void {
    this.throttlers.set(snapshot.id, {
      total: newSeries(snapshot.counters.granted),
      classes: new Map(snapshot.classes.map((c) => [c.id, newSeries(c.granted)])),
    });
  }

  forget(throttlerId: string): void {
    this.throttlers.delete(throttlerId);
  }

  sample(snapshot: QuotaBucketSnapshot, now: number): void {
    const state = this.throttlers.get(snapshot.id);
    if (!state) {
      this.track(snapshot);
      return;
    }
    advance(state.total, snapshot.counters.granted, now);
    const seen = new Set<string>();
    for (const c of snapshot.classes) {
      seen.add(c.id);
      const series = state.classes.get(c.id);
      if (series) advance(series, c.granted, now);
      else state.classes.set(c.id, newSeries(c.granted));
    }
    // A class removed by reconfiguration and drained disappears from the bucket, and from here.
    for (const id of state.classes.keys()) if (!seen.has(id)) state.classes.delete(id);
  }

  /** Units per second of a throttler, or of one of its classes. */
  rate(throttlerId: string, now: number, classId?: string): number {
    const state = this.throttlers.get(throttlerId);
    const series = classId === undefined ? state?.total : state?.classes.get(classId);
    return series ? series.window.rate(now) : 0;
  }
}

function newSeries(granted: number): Series {
  return { lastGranted: granted, window: new RateWindow(GRANTED_RATE_WINDOW_MS, GRANTED_RATE_SAMPLE_MS) };
}

function advance(series: Series, granted: number, now: number): void {
  const delta = granted - series.lastGranted;
  series.lastGranted = granted;
  if (delta > 0) series.window.add(delta, now);
}
