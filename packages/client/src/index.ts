export { DistributedThrottlerFactory, type DistributedThrottlerFactoryOptions } from "./distributed-throttler-factory.ts";
export { DynamicSpecWatcher, type DynamicSpecWatcherOptions } from "./dynamic-spec-watcher.ts";
export { retryBackoffMs } from "./retry-backoff.ts";
export { RetryingQuotaRemote, type QuotaRpcOutcome, type RetryingQuotaRemoteOptions } from "./retrying-quota-remote.ts";
export { ThrottlerHandle, type ThrottlerHandleMetrics } from "./throttler-handle.ts";
export { throttled, type ThrottledOptions } from "./throttled.ts";
