import { DEFAULT_CLASS } from "./class-scheduler.ts";
import type { PaceConfig } from "./pace-cursor.ts";

/** One named throttler as the controller runs it (docs/design.md §8.1, in core's units). */
export type ThrottlerKind = "rate" | "concurrency";

export interface QuotaBucketConfig {
  /**
   * "rate" (default): a token bucket, `limit` units per second. "concurrency": `limit` units in use
   * at once, given back by release (docs/design.md §11.2). Absent = "rate".
   */
  readonly kind?: ThrottlerKind;
  /** Units per second; null = unlimited. Ignored when `useClassWeightsAsLimit`. */
  readonly limit: number | null;
  /** Bucket window: capacity and largest burst are `limit × periodMs / 1000`. */
  readonly periodMs: number;
  /** Declared classes and their weights; `default` (weight 1) always exists besides them. */
  readonly classWeights: Readonly<Record<string, number>>;
  /** Rate = Σ declared weights (units/s): each backlogged class is served at its weight. */
  readonly useClassWeightsAsLimit: boolean;
  /** Largest chunk granted at once; the scheduler reconsiders classes between chunks. */
  readonly maxGrantAmount: number | null;
  /** Requests waiting at once; one more is refused with QUEUE_FULL. */
  readonly maxQueueSize: number;
  /**
   * How long a request whose deadline passed (or whose caller went away) keeps its place, so that a
   * retry with the same request id resumes there; also how long a granted request id is remembered
   * so that a retry is answered without granting twice.
   */
  readonly detachedGraceMs: number;
  /** Shaping (docs/design.md §11.1): grants are slots on one paced timeline (PaceCursor) instead of bursts. */
  readonly smooth: boolean;
  /** The clients' request_period: under `smooth`, how far ahead an answer may reach. */
  readonly requestPeriodMs: number;
}

export const QUOTA_BUCKET_DEFAULTS: QuotaBucketConfig = {
  kind: "rate",
  limit: null,
  periodMs: 10_000,
  classWeights: {},
  useClassWeightsAsLimit: false,
  maxGrantAmount: null,
  maxQueueSize: 10_000,
  detachedGraceMs: 60_000,
  smooth: false,
  requestPeriodMs: 5_000,
};

export function quotaBucketConfig(overrides: Partial<QuotaBucketConfig> = {}): QuotaBucketConfig {
  return { ...QUOTA_BUCKET_DEFAULTS, ...overrides };
}

/** The rate the token bucket runs at: the limit, or the sum of declared weights. */
export function effectiveLimitOf(config: QuotaBucketConfig): number | null {
  if (!config.useClassWeightsAsLimit) return config.limit;
  return Object.entries(config.classWeights)
    .filter(([id]) => id !== DEFAULT_CLASS)
    .reduce((sum, [, weight]) => sum + weight, 0);
}

/**
 * Most chunks one `poll` grants. A request of 10^9 units with `max_grant_amount` 10 is 10^8 chunks;
 * granting them in one go would hold the event loop for seconds. Past this many, `poll` returns and
 * `nextWakeAt` says "now", so the driver yields to the event loop and carries on (a turn is ~2 ms).
 */
export const GRANT_CHUNKS_PER_POLL = 4096;

/**
 * Granted request ids a bucket remembers at most, per unit of `max_queue_size`. Past the bound the
 * oldest are forgotten before their grace ends (a retry of one is then granted again): a throttler
 * granting more than bound ÷ grace new ids per second (16,700/s with the defaults) remembers each for
 * less than the grace, and never refuses fresh work for its bookkeeping (docs/internals/request-ids.md).
 */
export const REQUEST_IDS_PER_QUEUE_SLOT = 100;

/** What a smooth throttler's cursor paces by: the rate in force and the clients' request_period. */
export function paceConfigOf(config: QuotaBucketConfig): PaceConfig {
  return { limit: effectiveLimitOf(config), requestPeriodMs: config.requestPeriodMs };
}
