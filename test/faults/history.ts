// The history of one fault-harness run (docs/design.md §5.3), Jepsen-style: every process appends what it
// saw, with the wall-clock time it saw it, as one JSON object per line. All processes run on one
// machine, so their Date.now() share one clock; the checker merges the files and orders by `at`.
import { closeSync, openSync, readFileSync, readdirSync, writeSync } from "node:fs";
import { join } from "node:path";

export type FaultKind = "kill-leader" | "pause-leader" | "restart-broker" | "all-down-group-deleted" | "cut-connection";
export const FAULT_KINDS: readonly FaultKind[] = ["kill-leader", "pause-leader", "restart-broker", "all-down-group-deleted", "cut-connection"];

/** What the checker needs to know of a throttler: its bound's terms. */
export interface ThrottlerInfo {
  readonly id: string;
  readonly kind: "rate" | "concurrency";
  /** Fixed limit; null for an adaptive throttler, whose limit comes from `limit` events. */
  readonly limit: number | null;
  readonly periodMs: number;
  readonly smooth: boolean;
  /**
   * The client's request_period: it prefetches at most ceil(limit × request_period) (docs/design.md §9.7), and
   * one such refill may be granted on a positive balance and overdraw it (pay-after, §4.1).
   */
  readonly requestPeriodMs: number;
  /** Adaptive only: the highest limit the loop may set (the bound when no reading is near). */
  readonly maxLimit?: number;
  /** Concurrency only: its lease_timeout, which bounds how soon it grants again after a fault (liveness.ts). */
  readonly leaseTimeoutMs?: number;
}

export type HistoryEvent =
  /** The run's throttlers and client count, written first by the harness. */
  | { type: "setup"; at: number; seed: number; clients: number; throttlers: ThrottlerInfo[] }
  /** throttle(amount) resolved: the caller may use `amount` units (held until released, for a concurrency throttler). */
  | { type: "grant"; at: number; client: string; throttler: string; amount: number; version: number; startedAt: number; deadlineAt: number }
  /** release(amount) is about to be called: recorded before the controller can hand the units to anyone else. */
  | { type: "release"; at: number; client: string; throttler: string; amount: number }
  /** throttle(amount) rejected (an answer too: the caller knows where it stands). */
  | { type: "fail"; at: number; client: string; throttler: string; amount: number; code: string; startedAt: number; deadlineAt: number }
  /** A call still unanswered when its client stopped. */
  | { type: "pending"; at: number; client: string; throttler: string; amount: number; startedAt: number; deadlineAt: number }
  /** The dynamic_spec version a client holds, or the one a serving leader answered with (sentAt = when asked). */
  | { type: "spec"; at: number; source: "client" | "leader"; who: string; version: number }
  /** UpdateDynamicSpec answered with this version. */
  | { type: "reconfigure"; at: number; version: number; sentAt: number }
  /** A controller logged that it took over and restored the state (a documented restore). */
  | { type: "restore"; at: number; controller: string; line: string }
  /** An adaptive throttler's limit, read from the serving leader. */
  | { type: "limit"; at: number; throttler: string; limit: number }
  /** The nemesis: a fault starts or ends; `leaderAt` = when a serving leader answered again. */
  | { type: "fault"; at: number; index: number; kind: FaultKind; phase: "start" | "end"; target?: string; detail?: string }
  | { type: "recovered"; at: number; index: number; kind: FaultKind; leader: string; failoverMs: number };

/** Appends events to one file, synchronously: a process killed mid-run loses nothing it recorded. */
export class HistoryWriter {
  private readonly fd: number;
  private closed = false;

  constructor(readonly file: string) {
    this.fd = openSync(file, "a");
  }

  write(event: HistoryEvent): void {
    if (this.closed) return;
    writeSync(this.fd, `${JSON.stringify(event)}\n`);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }
}

/** Every event of every `*.jsonl` file in `dir`, ordered by time (ties keep file order). */
export function readHistory(dir: string): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  for (const name of readdirSync(dir)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()) {
    for (const line of readFileSync(join(dir, name), "utf8").split("\n")) {
      // A process killed mid-write leaves a torn last line: it carries no complete event.
      if (line.trim() === "") continue;
      try {
        events.push(JSON.parse(line) as HistoryEvent);
      } catch {}
    }
  }
  return sortByTime(events);
}

export function sortByTime(events: readonly HistoryEvent[]): HistoryEvent[] {
  return events
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.at - b.e.at || a.i - b.i)
    .map(({ e }) => e);
}
