import type { ComputationStatsView } from "@sluice/runtime";

/**
 * The live status of `sluice run` / `sluice worker` in a terminal: one line per computation, rewritten
 * in place every second (like a progress display), so a person sees the rate limiting happen.
 */
export function formatStatus(view: ComputationStatsView): string {
  const lag = view.lagMs === null ? "–" : formatMs(view.lagMs);
  const failures = view.failures > 0 ? ` · ${view.failures} failures (last: ${view.lastError ?? "?"})` : "";
  return (
    `${view.computation}: ${view.rowsPerSecond.toFixed(0)} rows/s · ${formatBytes(view.bytesPerSecond)}/s · ` +
    `throttle wait ${(Math.min(1, view.throttleWaitRatio) * 100).toFixed(0)}% · lag ${lag} · ${view.rows} rows · ${view.activeJobs} jobs${failures}`
  );
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes.toFixed(0)} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export function formatMs(ms: number): string {
  return ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export class StatusLine {
  private lines = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly read: () => readonly ComputationStatsView[],
  ) {}

  start(intervalMs = 1000): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.render(), intervalMs);
    this.timer.unref();
  }

  /** Stops refreshing and leaves the last picture on screen. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.render();
    this.lines = 0;
  }

  private render(): void {
    const text = this.read().map(formatStatus);
    // Move up over the previous picture and clear each line before writing the new one.
    if (this.lines > 0) this.out.write(`\x1b[${this.lines}F`);
    for (const line of text) this.out.write(`\x1b[2K${line}\n`);
    this.lines = text.length;
  }
}
