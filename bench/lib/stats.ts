/**
 * Summaries of repeated measurements. Every figure in results.json is the median of several runs
 * with its spread, because the machines this runs on are shared and noisy: one run proves nothing.
 */
export interface Stat {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** (max − min) ÷ |median|: 0.1 means the runs spread over ±5 % around the median. */
  readonly spread: number;
  /** Every run's value, in the order they ran. */
  readonly runs: readonly number[];
}

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** Linear interpolation between the closest ranks (type 7, what numpy and R use by default). */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  const low = sorted[lower] ?? Number.NaN;
  const high = sorted[upper] ?? low;
  return low + (high - low) * (position - lower);
}

export function summarize(runs: readonly number[]): Stat {
  const finite = runs.filter((value) => Number.isFinite(value));
  if (finite.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN, spread: Number.NaN, runs: [...runs] };
  const mid = median(finite);
  const min = Math.min(...finite);
  const max = Math.max(...finite);
  return { median: mid, min, max, spread: mid === 0 ? (max === min ? 0 : Number.POSITIVE_INFINITY) : (max - min) / Math.abs(mid), runs: [...runs] };
}

/** Per-run ratios a[i] ÷ b[i], so that a slow moment of the machine hits both sides of one ratio. */
export function ratioRuns(numerators: readonly number[], denominators: readonly number[]): number[] {
  const count = Math.min(numerators.length, denominators.length);
  return Array.from({ length: count }, (_, i) => (numerators[i] ?? Number.NaN) / (denominators[i] ?? Number.NaN));
}

/** Percentiles of one sample of latencies (already in the unit wanted). */
export function percentiles(samples: ArrayLike<number>, qs: readonly number[]): number[] {
  if (samples.length === 0) return qs.map(() => Number.NaN);
  const sorted = Float64Array.from(samples).sort();
  return qs.map((q) => {
    const position = (sorted.length - 1) * q;
    const lower = Math.floor(position);
    const upper = Math.ceil(position);
    const low = sorted[lower] ?? Number.NaN;
    const high = sorted[upper] ?? low;
    return low + (high - low) * (position - lower);
  });
}
