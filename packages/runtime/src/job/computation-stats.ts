import { RateWindow } from "@sluice/core";
import { IterationParts, type IterationPartView } from "./iteration-parts.ts";

export interface ComputationStatsView {
  readonly computation: string;
  readonly rows: number;
  readonly bytes: number;
  readonly iterations: number;
  readonly failures: number;
  readonly rowsPerSecond: number;
  readonly bytesPerSecond: number;
  /** Total time iterations waited in Input.Throttle. */
  readonly throttleWaitMs: number;
  /** Share of the jobs' time spent waiting in Input.Throttle over the last window: 1.0 = always waiting. */
  readonly throttleWaitRatio: number;
  /**
   * Now minus the oldest lag timestamp of its jobs (oldest event time read and not processed +
   * stream_delay, docs/design.md §12), ms, never below 0; when nothing waits, now minus the event time of
   * the last processed message; null before the first.
   */
  readonly lagMs: number | null;
  readonly activeJobs: number;
  readonly lastError: string | null;
  /** Seconds spent in each part of the iterations (docs/design.md §15): always the four parts, in order. */
  readonly parts: readonly IterationPartView[];
}

/** Counters of one computation on one worker, shared by its jobs; read by the status line and /metrics. */
export class ComputationStats {
  rows = 0;
  bytes = 0;
  iterations = 0;
  failures = 0;
  throttleWaitMs = 0;
  activeJobs = 0;
  lastEventTimestampMs: number | null = null;
  lastError: string | null = null;
  /** The jobs record each iteration's parts here (Job.iterate). */
  readonly parts = new IterationParts();
  private readonly rowRate = new RateWindow();
  private readonly byteRate = new RateWindow();
  private readonly waitRate = new RateWindow();
  private readonly lagTimestamps = new Set<() => number>();

  constructor(readonly computation: string) {}

  recordIteration(rows: number, bytes: number, lastEventTimestampMs: number, now: number): void {
    this.rows += rows;
    this.bytes += bytes;
    this.iterations += 1;
    this.lastEventTimestampMs = lastEventTimestampMs;
    this.rowRate.add(rows, now);
    this.byteRate.add(bytes, now);
  }

  /** A job's (or computation partition's) lag timestamp, read at each view; 0 means nothing waits. */
  watchLagTimestamp(lagTimestampMs: () => number): void {
    this.lagTimestamps.add(lagTimestampMs);
  }

  recordThrottleWait(waitMs: number, now: number): void {
    this.throttleWaitMs += waitMs;
    this.waitRate.add(waitMs, now);
  }

  recordFailure(error: unknown): void {
    this.failures += 1;
    this.lastError = error instanceof Error ? error.message : String(error);
  }

  view(now: number): ComputationStatsView {
    return {
      computation: this.computation,
      rows: this.rows,
      bytes: this.bytes,
      iterations: this.iterations,
      failures: this.failures,
      rowsPerSecond: this.rowRate.rate(now),
      bytesPerSecond: this.byteRate.rate(now),
      throttleWaitMs: this.throttleWaitMs,
      throttleWaitRatio: this.waitRate.rate(now) / 1000 / Math.max(1, this.activeJobs),
      lagMs: this.lagMs(now),
      activeJobs: this.activeJobs,
      lastError: this.lastError,
      parts: this.parts.view(),
    };
  }

  private lagMs(now: number): number | null {
    let oldest = Number.POSITIVE_INFINITY;
    for (const read of this.lagTimestamps) {
      const t = read();
      if (t > 0 && t < oldest) oldest = t;
    }
    if (oldest !== Number.POSITIVE_INFINITY) return Math.max(0, now - oldest);
    return this.lastEventTimestampMs === null ? null : Math.max(0, now - this.lastEventTimestampMs);
  }
}
