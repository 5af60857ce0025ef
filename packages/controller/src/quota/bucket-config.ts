import { QUOTA_BUCKET_DEFAULTS, type QuotaBucketConfig } from "@sluice/core";
import type { ThrottlerSpec } from "@sluice/spec";

/**
 * One throttler of the dynamic_spec in core's terms (docs/design.md §8.1 → QuotaBucketConfig). The parsed
 * spec already carries durations in ms and every default, so this is a renaming, not a policy.
 * Fields that only matter to clients (rpc_timeout, retrying_channel) do not reach the bucket;
 * request_period does, for a smooth throttler's pacing reach (docs/design.md §11.1).
 */
export function bucketConfigOf(throttler: ThrottlerSpec, detachedGraceMs = QUOTA_BUCKET_DEFAULTS.detachedGraceMs): QuotaBucketConfig {
  const classWeights = Object.fromEntries(Object.entries(throttler.classes).map(([id, spec]) => [id, spec.weight]));
  return {
    kind: throttler.kind,
    limit: throttler.limit,
    periodMs: throttler.period,
    classWeights,
    useClassWeightsAsLimit: throttler.use_class_weights_as_limit,
    maxGrantAmount: throttler.max_grant_amount,
    maxQueueSize: throttler.max_queue_size,
    detachedGraceMs,
    smooth: throttler.smooth,
    requestPeriodMs: throttler.request_period,
  };
}

/** Whether a reconfiguration changes anything the bucket sees (for the log line only). */
export function sameBucketConfig(a: QuotaBucketConfig, b: QuotaBucketConfig): boolean {
  const weightsA = Object.entries(a.classWeights);
  return (
    (a.kind ?? "rate") === (b.kind ?? "rate") &&
    a.limit === b.limit &&
    a.periodMs === b.periodMs &&
    a.useClassWeightsAsLimit === b.useClassWeightsAsLimit &&
    a.maxGrantAmount === b.maxGrantAmount &&
    a.maxQueueSize === b.maxQueueSize &&
    a.detachedGraceMs === b.detachedGraceMs &&
    a.smooth === b.smooth &&
    a.requestPeriodMs === b.requestPeriodMs &&
    weightsA.length === Object.keys(b.classWeights).length &&
    weightsA.every(([id, weight]) => b.classWeights[id] === weight)
  );
}

/** `150/s`, `unlimited`, or `Σweights=3/s` under use_class_weights_as_limit: for log lines and the CLI. */
export function describeLimit(config: QuotaBucketConfig): string {
  if (config.kind === "concurrency") return config.limit === null ? "unlimited in use" : `${config.limit} in use`;
  const shaping = config.smooth ? " smooth" : "";
  if (config.useClassWeightsAsLimit) {
    const sum = Object.values(config.classWeights).reduce((total, weight) => total + weight, 0);
    return `${sum}/s (class weights)${shaping}`;
  }
  return config.limit === null ? "unlimited" : `${config.limit}/s${shaping}`;
}
