import type { WireRequestQuotaResponse } from "./proto-definition.ts";
import type { RequestQuotaResult } from "./quota-service.ts";
import { toUint64 } from "./uint64.ts";

/** A grant as both gRPC servers send it (unary RequestQuota and a QuotaStream answer): 0 = not paced. */
export function wireRequestQuotaResponseOf(result: RequestQuotaResult): WireRequestQuotaResponse {
  return {
    granted: result.granted,
    waitedMs: toUint64(result.waitedMs),
    paceStartDelayMs: result.paceStartDelayMs ?? 0,
    paceIntervalMs: result.paceIntervalMs ?? 0,
    paceAnsweredAtMs: result.paceAnsweredAtMs ?? 0,
  };
}
