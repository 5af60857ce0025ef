/**
 * What a QuotaBucket makes grants from: a token bucket (rate throttler) or units in use (concurrency
 * throttler), chosen by the throttler's kind. Kept apart so that the bucket's queueing reads the same
 * for both kinds, and the rule for a change of kind lives in one place.
 */
import { ConcurrencyUnits } from "./concurrency-units.ts";
import { effectiveLimitOf, type QuotaBucketConfig } from "./quota-bucket-config.ts";
import { TokenBucket } from "./token-bucket.ts";

export type UnitSource = TokenBucket | ConcurrencyUnits;

export function unitSourceOf(config: QuotaBucketConfig, now: number): UnitSource {
  const limit = effectiveLimitOf(config);
  return config.kind === "concurrency" ? new ConcurrencyUnits(limit) : new TokenBucket({ limit, periodMs: config.periodMs }, now);
}

/**
 * The source after a reconfiguration: the same one with the new limit, or a fresh one when the kind
 * changed (tokens and units in use mean different things).
 */
export function reconfiguredUnitSource(source: UnitSource, config: QuotaBucketConfig, now: number): UnitSource {
  if (source.kind !== (config.kind ?? "rate")) return unitSourceOf(config, now);
  source.reconfigure({ limit: effectiveLimitOf(config), periodMs: config.periodMs }, now);
  return source;
}
