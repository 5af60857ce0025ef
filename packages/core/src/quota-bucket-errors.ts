import type { Entry } from "./quota-entry.ts";
import { MAX_REQUEST_AMOUNT } from "./quota-request.ts";
import { SluiceError } from "./sluice-error.ts";

/** Why an amount cannot be accepted, or null when it can. `requestId` is the client's ("" = none, not named). */
export function checkAmount(throttlerId: string, amount: number, requestId: string): SluiceError | null {
  const where = `throttler "${throttlerId}"${requestId ? `, request "${requestId}"` : ""}`;
  if (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0) {
    return new SluiceError("INVALID_AMOUNT", `amount must be a finite number >= 0, got ${String(amount)} (${where})`, {
      throttlerId,
      amount,
    });
  }
  if (amount > MAX_REQUEST_AMOUNT) {
    return new SluiceError(
      "INVALID_AMOUNT",
      `amount ${amount} exceeds the largest single request ${MAX_REQUEST_AMOUNT} (${where}); split it into smaller requests`,
      { throttlerId, amount, maxAmount: MAX_REQUEST_AMOUNT },
    );
  }
  return null;
}

/** The same request id sent again with another amount: refused rather than answered with the first one's grant. */
export function reusedIdError(throttlerId: string, requestId: string, earlierAmount: number, amount: number): SluiceError {
  return new SluiceError(
    "INVALID_REQUEST",
    `request "${requestId}" on throttler "${throttlerId}" was sent for amount ${earlierAmount} and now for ${amount}; ` +
      `a request id names one request (a retry sends the same amount): use a new id for a new request`,
    { throttlerId, amount, earlierAmount },
  );
}

export function queueFullError(throttlerId: string, pendingRequests: number, maxQueueSize: number): SluiceError {
  return new SluiceError(
    "QUEUE_FULL",
    `throttler "${throttlerId}" has ${pendingRequests} requests waiting (max_queue_size ${maxQueueSize}); retry with backoff`,
    { throttlerId, pendingRequests, maxQueueSize },
  );
}

export interface TimeoutContext {
  readonly throttlerId: string;
  readonly waitedMs: number;
  readonly limit: number | null;
  /** A concurrency throttler's limit is units in use at once, not a rate. */
  readonly kind?: "rate" | "concurrency";
  readonly pendingRequests: number;
  readonly detachedGraceMs: number;
}

export function timeoutError(entry: Entry, context: TimeoutContext): SluiceError {
  const { throttlerId, waitedMs, limit, pendingRequests, detachedGraceMs } = context;
  const limitText = limit === null ? "unlimited" : context.kind === "concurrency" ? `${limit} units in use at once` : `${limit}/s`;
  return new SluiceError(
    "QUOTA_TIMEOUT",
    `${entry.requestId === "" ? "a request without a request id" : `request "${entry.requestId}"`} for ${entry.amount} units (class "${entry.classId}") waited ${Math.round(waitedMs)} ms on throttler "${throttlerId}" ` +
      `(limit ${limitText}, ${pendingRequests} requests waiting) and was not granted; ` +
      `it keeps its place for ${detachedGraceMs} ms: retry with the same request id to resume`,
    { throttlerId, requestId: entry.requestId, amount: entry.amount, waitedMs, limit },
  );
}
