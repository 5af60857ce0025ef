/**
 * Where an iteration's time goes (docs/design.md §15, the reference's "Epoch parts time"): one histogram of
 * seconds per part of the iteration, named as the iteration's child spans (docs/design.md §3). The job
 * reads its clock at the parts' boundaries, where the spans start and end, so a part's sum is the
 * sum of its spans' durations whether or not tracing is on.
 */
export const ITERATION_PARTS = ["Input.Throttle", "Process", "Output", "Commit"] as const;
export type IterationPart = (typeof ITERATION_PARTS)[number];

/**
 * Upper bounds, seconds: from 100 µs (an unthrottled Process of a few rows) to a minute (a throttle
 * wait behind a long queue).
 */
export const PART_BUCKETS_SECONDS = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] as const;

export interface IterationPartView {
  readonly part: IterationPart;
  readonly count: number;
  readonly sumSeconds: number;
  /** Cumulative counts per upper bound of PART_BUCKETS_SECONDS (the +Inf bucket is `count`). */
  readonly buckets: readonly number[];
}

/** One part's histogram: a count, a sum, and counts per bucket (not cumulative until viewed). */
export class PartHistogram {
  count = 0;
  sumSeconds = 0;
  private readonly perBucket = new Float64Array(PART_BUCKETS_SECONDS.length);

  constructor(readonly part: IterationPart) {}

  recordMs(ms: number): void {
    const seconds = ms > 0 ? ms / 1000 : 0;
    this.count += 1;
    this.sumSeconds += seconds;
    // A loop, not findIndex: no closure per iteration of the job loop.
    for (let i = 0; i < PART_BUCKETS_SECONDS.length; i++) {
      if (seconds <= (PART_BUCKETS_SECONDS[i] as number)) {
        this.perBucket[i] = (this.perBucket[i] as number) + 1;
        return;
      }
    }
  }

  view(): IterationPartView {
    let running = 0;
    const buckets = Array.from(this.perBucket, (n) => (running += n));
    return { part: this.part, count: this.count, sumSeconds: this.sumSeconds, buckets };
  }
}

/** The four parts of one computation's iterations on one worker, shared by its jobs. */
export class IterationParts {
  readonly throttle = new PartHistogram("Input.Throttle");
  readonly process = new PartHistogram("Process");
  readonly output = new PartHistogram("Output");
  readonly commit = new PartHistogram("Commit");

  /** Always the four parts, in ITERATION_PARTS order (zero counts before the first iteration). */
  view(): IterationPartView[] {
    return [this.throttle.view(), this.process.view(), this.output.view(), this.commit.view()];
  }
}
