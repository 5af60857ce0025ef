import type { Clock } from "@sluice/core";
import type { PartitionBound, PartitionWatermarkReport } from "@sluice/protocol";

/** `watermark_alignment` of the partition's computation, durations in ms (docs/design.md §12). */
export interface AlignmentSettings {
  readonly groupName: string;
  readonly driftBoundMs: number;
  readonly idleTimeoutMs: number;
}

/** The controller's answer about this partition's group, as the gate uses it. */
export interface AlignmentAnswer {
  readonly bound: PartitionBound;
  readonly controllerInstance: string;
  readonly settling: boolean;
}

/**
 * One aligned input partition on this worker: its read watermark, whether it may read, and the
 * wait of a job that may not. Pure bookkeeping on an injected clock; the worker's
 * WatermarkAlignment carries reports and answers.
 *
 * The rules, and why none of them can stall a group for good:
 * - The read watermark is the largest event time among records the job took into an iteration
 *   (it passed this gate); a partition that has read nothing has none and is never held itself.
 * - A partition may read while its watermark ≤ (minimum over the *other* live partitions of its
 *   group) + drift_bound, or when there is no other live partition. The slowest live partition
 *   therefore always may read, and it reads as fast as it can between reports.
 * - Idle = not held, no batch being handled, and nothing delivered for idle_timeout. A held
 *   partition is never idle: it is paused *because* it has data (FLIP-471's misdetection).
 * - A partition held on a previous controller's word stays held while a restarted controller is
 *   still `settling` (it may not have heard from every worker yet), and no longer.
 * - Once it has a watermark, a partition does not read before the controller's first answer (one
 *   report's wait), so a partition far ahead does not race through its backlog at start.
 */
export class AlignedPartition {
  private watermark = 0;
  private untimed = false;
  private busy = 0;
  private lastActivityAt: number;
  private answer: AlignmentAnswer | null = null;
  private heldFlag = false;
  /** The controller instance whose answer held it; null = held while waiting for a first answer. */
  private heldBy: string | null = null;
  private released = false;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly id: string,
    readonly computation: string,
    readonly settings: AlignmentSettings,
    private readonly clock: Clock,
    /** Asks the worker to report soon (a first watermark, a new hold). */
    private readonly reportSoon: () => void,
  ) {
    this.lastActivityAt = clock.now();
  }

  get watermarkMs(): number {
    return this.watermark;
  }

  get held(): boolean {
    return this.heldFlag;
  }

  /** A batch is being handled (the job has data): never idle meanwhile. */
  begin(): void {
    this.busy += 1;
    this.lastActivityAt = this.clock.now();
  }

  end(): void {
    this.busy = Math.max(0, this.busy - 1);
    this.lastActivityAt = this.clock.now();
  }

  /** The job took these records into an iteration: they raise the read watermark. */
  noteRead(eventTimesMs: Iterable<number>): void {
    const before = this.watermark;
    let timed = false;
    for (const t of eventTimesMs) {
      if (!Number.isFinite(t) || t <= 0) continue;
      timed = true;
      if (t > this.watermark) this.watermark = Math.floor(t);
    }
    if (!timed && this.watermark === 0) this.untimed = true;
    // The others' minimum in an earlier answer stays true; the group just needs to hear of this one.
    if (before === 0 && this.watermark > 0) this.reportSoon();
  }

  /** Whether the job may start an iteration now (see the class comment). */
  mayRead(): boolean {
    if (this.released) return true;
    if (this.watermark === 0) return true;
    const answer = this.answer;
    if (!answer) return false;
    if (answer.bound.unbounded) return true;
    return this.watermark <= answer.bound.othersWatermarkMs + this.settings.driftBoundMs;
  }

  /**
   * Waits until the partition may read; while it may not, it is held: `hold(true)` pauses it at
   * the source, and the worker reports it held. Resolves (without throwing) when `signal` aborts.
   */
  async whenReadable(signal: AbortSignal, hold: (held: boolean) => void): Promise<void> {
    if (this.mayRead() || signal.aborted) return;
    this.heldFlag = true;
    this.heldBy = this.answer?.controllerInstance ?? null;
    hold(true);
    this.reportSoon();
    try {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          this.waiters.delete(done);
          resolve();
        };
        this.waiters.add(done);
        signal.addEventListener("abort", done, { once: true });
      });
    } finally {
      this.heldFlag = false;
      this.heldBy = null;
      if (!signal.aborted) hold(false);
      this.reportSoon();
    }
  }

  /** The controller answered: wake the held job if it may read now. */
  applyAnswer(answer: AlignmentAnswer): void {
    const keepHolding = this.heldFlag && answer.settling && this.heldBy !== null && this.heldBy !== answer.controllerInstance;
    this.answer = answer;
    if (keepHolding) return;
    if (this.heldFlag && this.heldBy === null) this.heldBy = answer.controllerInstance;
    if (this.mayRead()) this.wake();
  }

  /** Alignment is off for good (the controller cannot align): every wait ends, nothing is held again. */
  release(): void {
    this.released = true;
    this.wake();
  }

  /** What the worker sends for this partition. */
  report(now: number): PartitionWatermarkReport {
    return { groupName: this.settings.groupName, partitionId: this.id, watermarkMs: this.watermark, idle: this.isIdle(now), held: this.heldFlag };
  }

  /**
   * Idle: nothing to read for idle_timeout, or records without event times (such a partition cannot
   * be aligned, so it must not hold the others).
   */
  isIdle(now: number): boolean {
    if (this.heldFlag) return false;
    if (this.untimed && this.watermark === 0) return true;
    return this.busy === 0 && now - this.lastActivityAt >= this.settings.idleTimeoutMs;
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
