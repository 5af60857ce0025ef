export {
  Controller,
  type ControllerOptions,
  type ControllerSnapshot,
  type ControllerThrottlerSnapshot,
  type ControllerClassSnapshot,
} from "./quota/controller.ts";
export { AlignmentGroups, ALIGNMENT_DEFAULTS, type AlignmentGroupSnapshot, type AlignmentGroupsOptions } from "./quota/alignment/alignment-groups.ts";
export { MAX_PARTITIONS_PER_REPORT } from "./quota/alignment/report-limits.ts";
export { startController, type StartControllerOptions, type RunningController } from "./quota/controller-server.ts";
export { bucketConfigOf, describeLimit } from "./quota/bucket-config.ts";
export { GRANTED_RATE_SAMPLE_MS, GRANTED_RATE_WINDOW_MS } from "./quota/granted-rates.ts";
export { REQUEST_QUOTA_SPAN, traceRequestQuota } from "./quota/request-quota-span.ts";
export { writeControllerMetrics } from "./status/controller-metrics.ts";
export { startControllerStatusServer, type ControllerStatusOptions } from "./status/controller-status.ts";
export * from "./failover/index.ts";
export type { BucketBalance } from "./quota/controller.ts";
export { AdaptiveLimitLoop, type AdaptiveSnapshot, type AdaptiveLoopOptions } from "./adaptive/adaptive-loop.ts";
export { decideLimit, initialLawState, ADAPTIVE_LAW, type AdaptiveDecision, type LoadReading, type ThrottlerUsage, type AdaptiveBounds } from "./adaptive/adaptive-law.ts";
export { prometheusLoadSource, moduleLoadSource, loadSourceOf, loadOfQueryAnswer, type LoadSource, type LoadSpec } from "./adaptive/load-source.ts";
