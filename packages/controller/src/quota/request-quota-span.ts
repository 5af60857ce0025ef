import { propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Attributes, type Span, type TextMapGetter, type Tracer } from "@opentelemetry/api";
import { SluiceError, type Clock } from "@sluice/core";
import type { CallContext, RequestQuotaCall, RequestQuotaResult } from "@sluice/protocol";

/** Span name of one RequestQuota call on the controller, as Jaeger lists it under `sluice-controller`. */
export const REQUEST_QUOTA_SPAN = "RequestQuota";

/**
 * Reads the trace context from the call's metadata only when a propagator asks for it: without a
 * tracing SDK nothing asks, and the call's metadata is never copied.
 */
const FROM_CALL_METADATA: TextMapGetter<CallContext> = {
  get: (carrier, key) => carrier.metadata[key],
  keys: (carrier) => Object.keys(carrier.metadata),
};

/** The span's options, one object for every call (a tracer only reads them). */
const SERVER_SPAN = Object.freeze({ kind: SpanKind.SERVER });

/**
 * Runs one RequestQuota inside a server span that is a child of the caller's span: the job sends
 * W3C `traceparent` in the call's metadata (from inside its Input.Throttle span), so in a trace the
 * controller's queueing shows up under the wait it caused. The parent comes from the metadata only,
 * never from the active context: the in-memory transport runs this handler in the caller's async
 * context, and a refill may be sent from a callback whose active context belongs to an older span.
 *
 * Attributes carry the request as the controller saw it and how it ended: `granted` or the
 * SluiceError code (QUOTA_TIMEOUT, CANCELLED, QUEUE_FULL, …).
 */
export function traceRequestQuota(
  tracer: Tracer,
  clock: Clock,
  call: RequestQuotaCall,
  context: CallContext,
  classId: string,
  serve: (call: RequestQuotaCall, context: CallContext) => RequestQuotaResult | Promise<RequestQuotaResult>,
): RequestQuotaResult | Promise<RequestQuotaResult> {
  const parent = propagation.extract(ROOT_CONTEXT, context, FROM_CALL_METADATA);
  const span = tracer.startSpan(REQUEST_QUOTA_SPAN, SERVER_SPAN, parent);
  // Without a tracing SDK (or a sampler that drops it) the span records nothing: no attributes, no
  // wrapper around the grant (an async frame and a promise per call would weigh on every waiting
  // request and every grant).
  if (!span.isRecording()) {
    span.end();
    try {
      return serve(call, context);
    } catch (error) {
      return Promise.reject(error); // as the async path would: a refusal is always a rejection
    }
  }
  return recordRequestQuota(span, clock, call, context, classId, serve);
}

/**
 * The attributes are set once the span is known to record, after its start: a sampler does not see
 * them (the SDK's default sampler never looks), and an unrecorded call never builds them.
 */
async function recordRequestQuota(
  span: Span,
  clock: Clock,
  call: RequestQuotaCall,
  context: CallContext,
  classId: string,
  serve: (call: RequestQuotaCall, context: CallContext) => RequestQuotaResult | Promise<RequestQuotaResult>,
): Promise<RequestQuotaResult> {
  // Built by assignment, not with conditional spreads.
  const attributes: Attributes = {
    "rpc.service": "sluice.throttler.v1.QuotaService",
    "rpc.method": "RequestQuota",
    "sluice.throttler_id": call.throttlerId,
    "sluice.quota.class_id": classId,
    "sluice.quota.amount": call.amount,
    "sluice.quota.request_id": call.requestId,
    "sluice.quota.client_id": call.clientId,
    "sluice.quota.priority_ms": call.timestampMs,
  };
  // An undeclared class is served as `default` (docs/design.md §9.2): say what was asked for.
  if (call.quotaClassId !== "" && call.quotaClassId !== classId) attributes["sluice.quota.requested_class_id"] = call.quotaClassId;
  const startedAt = clock.now();
  if (context.deadlineAt !== null) attributes["sluice.quota.deadline_ms"] = Math.max(0, context.deadlineAt - startedAt);
  span.setAttributes(attributes);
  try {
    const result = await serve(call, context);
    // waitedMs is the bucket's own figure: from the request's first arrival, across retries.
    span.setAttributes({
      "sluice.quota.outcome": "granted",
      "sluice.quota.granted": result.granted,
      "sluice.quota.waited_ms": result.waitedMs,
    });
    return result;
  } catch (error) {
    const code = error instanceof SluiceError ? error.code : "INTERNAL";
    const message = error instanceof Error ? error.message : String(error);
    span.setAttributes({
      "sluice.quota.outcome": code,
      "sluice.error.code": code,
      "sluice.quota.waited_ms": clock.now() - startedAt,
    });
    span.setStatus({ code: SpanStatusCode.ERROR, message });
    throw error;
  } finally {
    span.end();
  }
}
