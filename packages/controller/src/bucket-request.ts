import type { AcquireRequest } from "@sluice/core";
import type { CallContext, RequestQuotaCall } from "@sluice/protocol";

/**
 * A RequestQuota call as the bucket's driver takes it. DESIGN §4.10: an RPC that is cancelled or
 * passes its deadline keeps its place (detached) for a retry with the same request_id, instead of
 * going to the back of the queue.
 */
export function bucketRequestOf(call: RequestQuotaCall, context: CallContext): AcquireRequest {
  return {
    amount: call.amount,
    requestId: call.requestId,
    clientId: call.clientId,
    // Lag priority must be a usable number for the queue order; anything else means "no
    // information yet" (0), exactly as the uint64 on the wire would carry it.
    timestampMs: Number.isFinite(call.timestampMs) && call.timestampMs > 0 ? call.timestampMs : 0,
    classId: call.quotaClassId,
    deadlineAt: context.deadlineAt,
    // A transport's Cancellation when it offers one: reading `signal` would make an AbortSignal (and
    // its listener) for every waiting call.
    ...(context.cancellation ? { cancellation: context.cancellation } : { signal: context.signal }),
    onAbort: "detach",
  };
}
