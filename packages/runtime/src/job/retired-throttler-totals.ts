import { ThrottlerMeters } from "@sluice/client";
import { throttlerMetricsView, type ThrottlerMetricsView } from "./throttler-metrics-view.ts";

/**
 * The throttler sensors of the jobs a worker stopped (revoked partitions, restarts), folded into one
 * running total per computation and throttler as each job stops. Memory is bounded by the
 * computations × throttlers this worker ran, not by how many partitions came and went; a scrape
 * reads one total per pair instead of re-summing every job that ever stopped.
 */
export class RetiredThrottlerTotals {
  private readonly totals = new Map<string, { readonly computation: string; readonly throttlerId: string; readonly meters: ThrottlerMeters }>();

  fold(computation: string, throttlerId: string, meters: ThrottlerMeters): void {
    const key = `${computation}\u0000${throttlerId}`;
    let total = this.totals.get(key);
    if (!total) {
      total = { computation, throttlerId, meters: new ThrottlerMeters() };
      this.totals.set(key, total);
    }
    total.meters.absorb(meters);
  }

  /** How many totals are kept (one per computation and throttler). */
  get size(): number {
    return this.totals.size;
  }

  views(now: number): ThrottlerMetricsView[] {
    return [...this.totals.values()].map(({ computation, throttlerId, meters }) => throttlerMetricsView(computation, meters.view(throttlerId, now)));
  }
}
