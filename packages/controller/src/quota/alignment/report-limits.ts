import { SluiceError } from "@sluice/core";
import type { ReportWatermarksCall } from "@sluice/protocol";
import { MAX_ID_LENGTH, quoteId } from "@sluice/spec";

/** More partitions than any one worker owns in practice; bounds what one message makes the controller keep. */
export const MAX_PARTITIONS_PER_REPORT = 10_000;

/** What makes a ReportWatermarks message unusable, named by its proto field, or null. */
export function reportProblem(call: ReportWatermarksCall): SluiceError | null {
  const refuse = (message: string, figures: Record<string, unknown>) =>
    new SluiceError("INVALID_REQUEST", `ReportWatermarks: ${message}`, { method: "ReportWatermarks", ...figures });
  if (call.clientId === "") return refuse("client_id is empty; send the worker id", { field: "client_id" });
  if (call.clientId.length > MAX_ID_LENGTH)
    return refuse(`client_id ${quoteId(call.clientId)} is longer than ${MAX_ID_LENGTH} characters`, { field: "client_id", length: call.clientId.length });
  if (call.partitions.length > MAX_PARTITIONS_PER_REPORT) {
    return refuse(`${call.partitions.length} partitions in one report, more than the ${MAX_PARTITIONS_PER_REPORT} accepted`, {
      field: "partitions",
      count: call.partitions.length,
      max: MAX_PARTITIONS_PER_REPORT,
    });
  }
  const seen = new Set<string>();
  for (const [index, p] of call.partitions.entries()) {
    const at = `partitions[${index}]`;
    for (const [field, id] of [
      ["partition_id", p.partitionId],
      ["group_name", p.groupName],
    ] as const) {
      if (id === "") return refuse(`${at}.${field} is empty`, { field: `${at}.${field}` });
      if (id.length > MAX_ID_LENGTH)
        return refuse(`${at}.${field} ${quoteId(id)} is longer than ${MAX_ID_LENGTH} characters`, { field: `${at}.${field}`, length: id.length });
    }
    if (!Number.isSafeInteger(p.watermarkMs) || p.watermarkMs < 0) {
      return refuse(`${at}.watermark_ms must be whole epoch milliseconds ≥ 0, got ${String(p.watermarkMs)}`, { field: `${at}.watermark_ms` });
    }
    if (seen.has(p.partitionId)) return refuse(`${at}.partition_id ${quoteId(p.partitionId)} is reported twice`, { field: `${at}.partition_id` });
    seen.add(p.partitionId);
  }
  return null;
}
