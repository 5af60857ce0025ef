// What users of @sluice/controller may import; etc/controller.api.md is its API Extractor report.
// The quota service
export {
  Controller,
  type BucketBalance,
  type ControllerClassSnapshot,
  type ControllerOptions,
  type ControllerSnapshot,
  type ControllerThrottlerSnapshot,
  type KeyedRecordSource,
  type PersistedKeyState,
} from "./quota/controller.ts";
export type { AlignmentGroupSnapshot } from "./quota/alignment/alignment-groups.ts";
export type { ConcurrencySnapshot } from "./quota/concurrency/concurrency-leases.ts";
export { startController, type RunningController, type StartControllerOptions } from "./quota/controller-server.ts";
export { REQUEST_QUOTA_SPAN } from "./quota/request-quota-span.ts";
export type { FailoverRole, FailoverStatus } from "./quota/failover-status.ts";
// Failover
export { FailoverController, type FailoverControllerOptions } from "./failover/failover-controller.ts";
export { startFailoverController, type RunningFailoverController, type StartFailoverControllerOptions } from "./failover/failover-server.ts";
// Status: the dashboard, /metrics
export { writeControllerMetrics } from "./status/controller-metrics.ts";
export { startControllerStatusServer, type ControllerStatusOptions } from "./status/controller-status.ts";
// Adaptive limits: the law (a pure function) and what the loop reports
export type { AdaptiveSnapshot } from "./adaptive/adaptive-loop.ts";
export {
  decideLimit,
  initialLawState,
  type AdaptiveAction,
  type AdaptiveBounds,
  type AdaptiveDecision,
  type LoadReading,
  type ThrottlerUsage,
} from "./adaptive/adaptive-law.ts";
export { loadSourceOf, type LoadSource, type LoadSourceOptions, type LoadSpec } from "./adaptive/load-source.ts";
