import type { AcquireRequest } from "@sluice/core";
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
