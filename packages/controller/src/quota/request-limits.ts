import { SluiceError } from "@sluice/core";
import type { ReleaseQuotaCall, RequestQuotaCall } from "@sluice/protocol";
import { MAX_ID_LENGTH, quoteId } from "@sluice/spec";

// Ids longer than MAX_ID_LENGTH are refused before anything keeps or echoes them (queues,
// remembered request ids, error messages, spans, logs): INVALID_REQUEST naming the method, the
// proto field — as a person sending the message knows it — and the figures.

export function requestQuotaProblem(call: RequestQuotaCall): SluiceError | null {
  return (
    idTooLong("RequestQuota", "throttler_id", call.throttlerId) ??
    idTooLong("RequestQuota", "client_id", call.clientId) ??
    idTooLong("RequestQuota", "request_id", call.requestId) ??
    idTooLong("RequestQuota", "quota_class_id", call.quotaClassId)
  );
}

export function releaseQuotaProblem(call: ReleaseQuotaCall): SluiceError | null {
  return (
    idTooLong("ReleaseQuota", "throttler_id", call.throttlerId) ??
    idTooLong("ReleaseQuota", "client_id", call.clientId) ??
    idTooLong("ReleaseQuota", "quota_class_id", call.quotaClassId)
  );
}

export function watchProblem(clientId: string): SluiceError | null {
  return idTooLong("WatchDynamicSpec", "client_id", clientId);
}

function idTooLong(method: string, field: string, id: string): SluiceError | null {
  if (id.length <= MAX_ID_LENGTH) return null;
  return new SluiceError(
    "INVALID_REQUEST",
    `${method}: ${field} ${quoteId(id)} is longer than the ${MAX_ID_LENGTH} characters an id may have; use a shorter id`,
    { method, field, length: id.length, maxLength: MAX_ID_LENGTH },
  );
}
