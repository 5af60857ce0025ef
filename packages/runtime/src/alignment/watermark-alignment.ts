import { SluiceError, asSluiceError, type Clock } from "@sluice/core";
import { REPORT_WATERMARKS_UNIMPLEMENTED, type GroupWatermarkView, type QuotaServiceClient } from "@sluice/protocol";
import type { Logger } from "../computation.ts";
import { AlignedPartition, type AlignmentSettings } from "./aligned-partition.ts";

export const WATERMARK_ALIGNMENT_DEFAULTS = Object.freeze({
  /** How often a worker reports its aligned partitions while none of their groups has a held member. */
  reportIntervalMs: 1_000,
  /**
   * How often while a group of its partitions has a held member (the controller's answer says so):
   * a held partition then learns of the others' progress within this, on any worker.
   */
  heldReportIntervalMs: 200,
  /** Deadline of one ReportWatermarks call. */
  rpcTimeoutMs: 5_000,
});

export interface WatermarkAlignmentOptions {
  readonly workerId: string;
  readonly client: () => QuotaServiceClient;
  readonly clock: Clock;
  readonly log: Logger;
  readonly reportIntervalMs?: number;
  readonly heldReportIntervalMs?: number;
}

/** Per computation and group: what the worker's /metrics shows. */
export interface AlignmentMetricsView {
  readonly computation: string;
  readonly group: string;
  readonly partitions: number;
  readonly held: number;
  /** The group's watermark as the controller last answered (epoch ms); null = unknown. */
  readonly groupWatermarkMs: number | null;
}

/**
 * A worker's side of watermark alignment (docs/design.md §12): the aligned partitions it owns, reported to
 * the controller every interval — all of them each time, so a revoked partition (no longer listed)
 * stops counting at once, and a restarted controller knows the groups again after one interval —
 * and soon after a partition reads for the first time or becomes held; five times as often while
 * one of their groups has a held member, so that the held one resumes soon after it may. Each answer is handed to
 * the partitions, which wake their held jobs when they may read.
 *
 * A controller that cannot be reached changes nothing: held partitions stay held (as quota waits
 * do) and resume with its first answer. A controller that does not implement ReportWatermarks
 * turns alignment off with one warning, rather than holding partitions forever.
 */
export class WatermarkAlignment {
  private readonly partitions = new Map<string, AlignedPartition>();
  private readonly stop = new AbortController();
  private readonly intervalMs: number;
  private readonly heldIntervalMs: number;
  private wakeLoop: AbortController | null = null;
  private soon = false;
  private groups = new Map<string, GroupWatermarkView>();
  private loop: Promise<void> | null = null;
  private lastProblem = "";
  private disabled = false;

  constructor(private readonly options: WatermarkAlignmentOptions) {
    this.intervalMs = options.reportIntervalMs ?? WATERMARK_ALIGNMENT_DEFAULTS.reportIntervalMs;
    this.heldIntervalMs = Math.min(this.intervalMs, options.heldReportIntervalMs ?? WATERMARK_ALIGNMENT_DEFAULTS.heldReportIntervalMs);
  }

  /** The partition's alignment state, created on first use (assignment or first batch). */
  partition(computation: string, stream: string, partition: number, settings: AlignmentSettings): AlignedPartition {
    const id = `${computation}/${stream}/${partition}`;
    let aligned = this.partitions.get(id);
    if (!aligned) {
      aligned = new AlignedPartition(id, computation, settings, this.options.clock, () => this.reportSoon());
      if (this.disabled) aligned.release();
      this.partitions.set(id, aligned);
      this.reportSoon();
    }
    this.loop ??= this.run();
    return aligned;
  }

  /** Revoked or stopped here: no longer reported, so it no longer holds its group back. */
  forget(computation: string, stream: string, partition: number): void {
    const id = `${computation}/${stream}/${partition}`;
    const aligned = this.partitions.get(id);
    if (!aligned) return;
    this.partitions.delete(id);
    aligned.release();
    this.reportSoon();
  }

  /** Group watermark (epoch ms, 0 = unknown) as the controller last answered it. */
  groupWatermarkMs(group: string): number {
    return this.groups.get(group)?.watermarkMs ?? 0;
  }

  metrics(): AlignmentMetricsView[] {
    const views = new Map<string, { computation: string; group: string; partitions: number; held: number; groupWatermarkMs: number | null }>();
    for (const p of this.partitions.values()) {
      const key = `${p.computation}\u0000${p.settings.groupName}`;
      const known = this.groupWatermarkMs(p.settings.groupName);
      const view = views.get(key) ?? {
        computation: p.computation,
        group: p.settings.groupName,
        partitions: 0,
        held: 0,
        groupWatermarkMs: known > 0 ? known : null,
      };
      view.partitions += 1;
      if (p.held) view.held += 1;
      views.set(key, view);
    }
    return [...views.values()];
  }

  /** Sends one report now and applies its answer (tests drive it; the loop calls it). */
  async reportNow(): Promise<void> {
    const client = this.options.client();
    if (this.disabled || (this.partitions.size === 0 && this.groups.size === 0)) return;
    const { clock, workerId } = this.options;
    const now = clock.now();
    const reported = [...this.partitions.values()];
    if (!client.reportWatermarks) return this.disable(REPORT_WATERMARKS_UNIMPLEMENTED);
    try {
      const answer = await client.reportWatermarks(
        { clientId: workerId, partitions: reported.map((p) => p.report(now)) },
        { deadlineAt: clock.now() + WATERMARK_ALIGNMENT_DEFAULTS.rpcTimeoutMs, signal: this.stop.signal },
      );
      this.groups = new Map(answer.groups.map((g) => [g.groupName, g]));
      const byId = new Map(answer.bounds.map((b) => [b.partitionId, b]));
      for (const p of reported) {
        const bound = byId.get(p.id);
        if (bound && this.partitions.get(p.id) === p) p.applyAnswer({ bound, controllerInstance: answer.controllerInstance, settling: answer.settling });
      }
      this.lastProblem = "";
    } catch (error) {
      if (this.stop.signal.aborted) return;
      const failure = asSluiceError(error, (message) => new SluiceError("CONTROLLER_UNAVAILABLE", message));
      // Refusals that no retry can cure would hold partitions forever: alignment goes off, loudly.
      if (failure.message.includes(REPORT_WATERMARKS_UNIMPLEMENTED) || failure.code === "INVALID_REQUEST")
        return this.disable(`${failure.code}: ${failure.message}`);
      // Once per distinct problem: a controller down for a minute is one line, not sixty.
      if (failure.message !== this.lastProblem) {
        this.lastProblem = failure.message;
        this.options.log.warn(
          `watermark alignment: ReportWatermarks failed (${failure.code}: ${failure.message}); held partitions stay held until the controller answers`,
        );
      }
    }
  }

  /** Ends the loop and every wait. Idempotent. */
  async close(): Promise<void> {
    this.stop.abort();
    this.wakeLoop?.abort();
    for (const p of this.partitions.values()) p.release();
    await this.loop;
  }

  private reportSoon(): void {
    this.soon = true;
    this.wakeLoop?.abort();
  }

  private async run(): Promise<void> {
    const { clock } = this.options;
    while (!this.stop.signal.aborted) {
      if (!this.soon) {
        this.wakeLoop = new AbortController();
        const someoneHeld = [...this.groups.values()].some((g) => g.held > 0);
        await clock.sleep(someoneHeld ? this.heldIntervalMs : this.intervalMs, this.wakeLoop.signal).catch(() => undefined);
        this.wakeLoop = null;
        if (this.stop.signal.aborted) return;
      }
      this.soon = false;
      await this.reportNow();
    }
  }

  private disable(reason: string): void {
    if (this.disabled) return;
    this.disabled = true;
    this.options.log.warn(`watermark alignment is off: ${reason}`);
    for (const p of this.partitions.values()) p.release();
  }
}
