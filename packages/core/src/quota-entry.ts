import type { QuotaRequest } from "./quota-request.ts";

/** Where a request stands inside a QuotaBucket. */
export type EntryState = "queued" | "detached" | "done";

/** One request (one request id) held by a QuotaBucket, from admission until granted or forgotten. */
export interface Entry {
  /**
   * The bucket's key for it: the client's request id, or for a request without one a key no client
   * id can equal (see `requestKey`).
   */
  readonly id: string;
  /** The id the client sent; "" when it sent none (the request is then not idempotent). */
  readonly requestId: string;
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
  /**
   * It found nobody waiting when it arrived: granted in that instant only at a positive balance, not
   * merely a non-negative one (docs/design.md §9.1). Cleared by its first chunk and by leaving the queue.
   */
  needsPositiveBalance: boolean;
  state: EntryState;
  inHeap: boolean;
}

/** A request just admitted: queued at `now`, nothing granted yet. */
export function newQueuedEntry(admitted: {
  readonly id: string;
  readonly request: QuotaRequest;
  readonly classId: string;
  readonly seq: number;
  readonly now: number;
  /** Nobody was waiting when it arrived (see `Entry.needsPositiveBalance`). */
  readonly needsPositiveBalance: boolean;
}): Entry {
  const { request } = admitted;
  return {
    id: admitted.id,
    requestId: request.requestId,
    clientId: request.clientId,
    classId: admitted.classId,
    timestampMs: request.timestampMs,
    seq: admitted.seq,
    enqueuedAt: admitted.now,
    amount: request.amount,
    remaining: request.amount,
    granted: 0,
    chargedVirtualTime: 0,
    deadlineAt: request.deadlineAt,
    detachedUntil: null,
    started: false,
    needsPositiveBalance: admitted.needsPositiveBalance,
    state: "queued",
    inHeap: false,
  };
}

/** A joined retry waits as long as the more patient of the two callers (null = no deadline). */
export function laterDeadline(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : Math.max(a, b);
}

/**
 * Keys of requests without an id are "~" and a sequence number; a client id that starts with "~" is
 * stored with one more "~" in front, so no id a client sends can ever equal an anonymous request's key
 * (a client sending "~0" must not join someone else's request and get its answer).
 */
export function requestKey(requestId: string, seq: number): string {
  if (requestId === "") return `~${seq}`;
  return requestId.charCodeAt(0) === 126 /* "~" */ ? `~${requestId}` : requestId;
}

/**
 * The next chunk of a request: all of it, or `max_grant_amount`. A chunk below the rounding step of
 * what remains (0.1 off 2^52) would subtract nothing and stall the request forever, so it is raised
 * to that step (validation asks for max_grant_amount ≥ 1, which never needs it).
 */
export function chunkOf(remaining: number, maxGrantAmount: number | null): number {
  if (maxGrantAmount === null || maxGrantAmount >= remaining) return remaining;
  if (remaining - maxGrantAmount < remaining) return maxGrantAmount;
  return Math.min(remaining, 2 ** (Math.floor(Math.log2(remaining)) - 52));
}
