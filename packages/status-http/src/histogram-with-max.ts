import { WAIT_BUCKETS_MS, type WaitHistogramView } from "@sluice/core";
import type { Labels, PrometheusText } from "./prometheus-text.ts";

// The wait-time histograms of the controller and of the worker are written the same way: the
// buckets of @sluice/core's WaitHistogram plus the recent maximum as a gauge of its own.

/** A histogram family plus `<name>_max`, the largest wait seen (the reference's wait_time.max). */
export function histogramWithMax(
  out: PrometheusText,
  name: string,
  help: string,
  series: readonly { readonly labels: Labels; readonly view: WaitHistogramView }[],
): void {
  out.histogram(
    name,
    help,
    WAIT_BUCKETS_MS,
    series.map(({ labels, view }) => ({ labels, buckets: view.buckets, count: view.count, sum: view.sumMs })),
  );
  out.gauge(
    `${name}_max`,
    `Longest single value of ${name} in the last minute (60 s, counted in 10 s slots), milliseconds; not an all-time maximum.`,
    series.map(({ labels, view }) => ({ labels, value: view.maxMs })),
  );
}
