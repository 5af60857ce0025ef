import type { AcquireRequest, Cancellation } from "@sluice/core";
import type { CallContext, RequestQuotaCall } from "@sluice/protocol";

/**
 * A RequestQuota call as the bucket's driver takes it. docs/design.md §9.10: an RPC that is cancelled or
 * passes its deadline keeps its place (detached) for a retry with the same request_id, instead of
 * going to the back of the queue.
 */
export function bucketRequestOf(call: RequestQuotaCall, context: CallContext): AcquireRequest {
  // A transport's Cancellation when it offers one: reading `signal` would make an AbortSignal (and
  // its listener) for every waiting call. Two literals rather than a spread: this runs per grant.
  const cancellation = context.cancellation;
  // Lag priority must be a usable number for the queue order; anything else means "no
  // information yet" (0), exactly as the uint64 on the wire would carry it.
  const timestampMs = Number.isFinite(call.timestampMs) && call.timestampMs > 0 ? call.timestampMs : 0;
  if (cancellation) {
    return {
      amount: call.amount,
      requestId: call.requestId,
      clientId: call.clientId,
      timestampMs,
      classId: call.quotaClassId,
      deadlineAt: context.deadlineAt,
      cancellation,
      onAbort: "detach",
    };
  }
  return {
    amount: call.amount,
    requestId: call.requestId,
    clientId: call.clientId,
    timestampMs,
    classId: call.quotaClassId,
    deadlineAt: context.deadlineAt,
    signal: context.signal,
    onAbort: "detach",
  };
}

/** An AcquireRequest that bucketRequestNow fills anew for each call. */
interface ReusedRequest {
  amount: number;
  requestId: string;
  clientId: string;
  timestampMs: number;
  classId: string;
  deadlineAt: number | null;
  signal: AbortSignal | undefined;
  cancellation: Cancellation | undefined;
  onAbort: "detach";
}

/**
 * The request bucketRequestNow fills: one object for every call, read by the driver's `acquireNow`
 * at once and kept by nothing (QuotaBucketDriver.acquireNow keeps no reference to its request).
 */
const reused: ReusedRequest = {
  amount: 0,
  requestId: "",
  clientId: "",
  timestampMs: 0,
  classId: "",
  deadlineAt: null,
  signal: undefined,
  cancellation: undefined,
  onAbort: "detach",
};

/**
 * bucketRequestOf for a driver's `acquireNow`, without an object per call: valid only until the next
 * call (the rate paths, which hand it to acquireNow at once; never for `acquire`, which may wait).
 */
export function bucketRequestNow(call: RequestQuotaCall, context: CallContext): AcquireRequest {
  const cancellation = context.cancellation;
  reused.amount = call.amount;
  reused.requestId = call.requestId;
  reused.clientId = call.clientId;
  reused.timestampMs = Number.isFinite(call.timestampMs) && call.timestampMs > 0 ? call.timestampMs : 0;
  reused.classId = call.quotaClassId;
  reused.deadlineAt = context.deadlineAt;
  reused.cancellation = cancellation;
  // Read only without a Cancellation: a QuotaStream call's signal is made when first read.
  reused.signal = cancellation ? undefined : context.signal;
  return reused;
}
