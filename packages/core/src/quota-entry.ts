/** Where a request stands inside a QuotaBucket. */
export type EntryState = "queued" | "detached" | "done";

/** One request (one request id) held by a QuotaBucket, from admission until granted or forgotten. */
export interface Entry {
  readonly id: string;
  readonly clientId: string;
  classId: string;
  readonly timestampMs: number;
  /** Arrival order: ties of timestamp go to the earlier arrival; kept across detach/reattach. */
  readonly seq: number;
  readonly enqueuedAt: number;
  readonly amount: number;
  remaining: number;
  granted: number;
  /** Virtual time charged for this request's chunks, replayed exactly on refund. */
  chargedVirtualTime: number;
  deadlineAt: number | null;
  detachedUntil: number | null;
  started: boolean;
  state: EntryState;
  inHeap: boolean;
}

/** A joined retry waits as long as the more patient of the two callers (null = no deadline). */
export function laterDeadline(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : Math.max(a, b);
}
