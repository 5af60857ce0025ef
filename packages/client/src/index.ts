export { connectThrottlers, type ConnectThrottlersOptions, type Throttlers } from "./connect-throttlers.ts";
export { ControllerConnection } from "./controller-connection.ts";
export { DistributedThrottlerFactory, type DistributedThrottlerFactoryOptions } from "./distributed-throttler-factory.ts";
export { DynamicSpecWatcher, type DynamicSpecWatcherOptions } from "./dynamic-spec-watcher.ts";
export { retryBackoffMs } from "./retry-backoff.ts";
export { RetryingQuotaRemote, type QuotaRpcOutcome, type RetryingQuotaRemoteOptions } from "./retrying-quota-remote.ts";
export { ThrottlerHandle, type ThrottlerHandleMetrics } from "./throttler-handle.ts";
export { ThrottlerMeters } from "./throttler-meters.ts";
export { throttled, type ThrottledOptions } from "./throttled.ts";
