/**
 * A job's priority key for quota (docs/design.md §10; the reference's StartRunIteration, ytflow.md §7.1):
 * the event timestamp of its oldest unprocessed message plus the stream's `stream_delay`, so the
 * job that lags most — the smallest key — is served first. 0 when it knows nothing yet ("top
 * priority to get some data").
 */
export function lagTimestamp(oldestUnprocessedMs: number | undefined, streamDelayMs: number): number {
  if (oldestUnprocessedMs === undefined || !Number.isFinite(oldestUnprocessedMs) || oldestUnprocessedMs <= 0) return 0;
  return Math.floor(oldestUnprocessedMs + streamDelayMs);
}
