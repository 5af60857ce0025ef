export { DistributedThrottlerFactory, type DistributedThrottlerFactoryOptions } from "./throttling/distributed-throttler-factory.ts";
export { DynamicSpecWatcher, type DynamicSpecWatcherOptions } from "./throttling/dynamic-spec-watcher.ts";
export { retryBackoffMs } from "./throttling/retry-backoff.ts";
export { RetryingQuotaRemote, type QuotaRpcOutcome, type RetryingQuotaRemoteOptions } from "./throttling/retrying-quota-remote.ts";
export { ThrottlerHandle, type ThrottlerHandleMetrics } from "./throttling/throttler-handle.ts";
