import { SMOOTH_MAX_ANSWER_SPAN_MS } from "@sluice/core";
import { effectiveLimit, type LimitFields, type ThrottlerSpec } from "@sluice/spec";

// What a job's throttler client is built from. Source: ytflow.md §2.1, `BuildPrefetchingConfig` and
// `ClientConfigEquals` of TDynamicThrottlerSpec.

/**
 * Constants of the prefetching client derived from a throttler spec (ytflow.md §2.1,
 * `BuildPrefetchingConfig`): the window spans 10 request periods but never less than 1 s, and an
 * unlimited throttler caps one prefetch at 1e9 units.
 */
export const PREFETCH_DEFAULTS = Object.freeze({
  minPrefetchAmount: 1,
  unlimitedMaxPrefetchAmount: 1_000_000_000,
  windowRequestPeriods: 10,
  minWindowMs: 1_000,
});

export interface PrefetchWindow {
  /** Refill RPCs per second the client aims at: one per request_period. */
  readonly targetRps: number;
  readonly minPrefetchAmount: number;
  /**
   * Largest single refill: `ceil(limit × request_period)` — `limit` is already per second, so
   * `period` must not divide it (the reference once did; that was a bug). 1e9 when unlimited.
   */
  readonly maxPrefetchAmount: number;
  /** Sliding window over which the client measures its refill rate. */
  readonly windowMs: number;
  /** True when the throttler is unlimited (its quota never binds): the client's pool grows faster. */
  readonly unbounded: boolean;
}

export type PrefetchFields = LimitFields & Pick<ThrottlerSpec, "request_period"> & { readonly adaptive?: ThrottlerSpec["adaptive"] };

/**
 * The limit a client sizes its prefetch by. An adaptive throttler's limit moves on the controller
 * and never reaches the client, so the client sizes by initial_limit: a grant is pay-after, and a
 * prefetch sized by max_limit could put the bucket in debt for many seconds once the loop has cut
 * the limit.
 */
function prefetchLimit(throttler: PrefetchFields): number | null {
  if (throttler.adaptive) return throttler.adaptive.initial_limit ?? throttler.adaptive.min_limit;
  return effectiveLimit(throttler);
}

export function prefetchWindow(throttler: PrefetchFields): PrefetchWindow {
  const requestPeriodMs = throttler.request_period;
  const limit = prefetchLimit(throttler);
  return {
    targetRps: 1000 / requestPeriodMs,
    minPrefetchAmount: PREFETCH_DEFAULTS.minPrefetchAmount,
    maxPrefetchAmount:
      limit === null
        ? PREFETCH_DEFAULTS.unlimitedMaxPrefetchAmount
        : Math.max(Math.ceil((limit * requestPeriodMs) / 1000), PREFETCH_DEFAULTS.minPrefetchAmount),
    windowMs: Math.max(PREFETCH_DEFAULTS.windowRequestPeriods * requestPeriodMs, PREFETCH_DEFAULTS.minWindowMs),
    unbounded: limit === null,
  };
}

export type SmoothWindowFields = PrefetchFields & Pick<ThrottlerSpec, "max_grant_amount">;

/**
 * A smooth client's window (docs/design.md §11.1): as `prefetchWindow`, with no answer longer than a second
 * of slots (`ceil(limit × min(request_period, 1 s))`) nor larger than `max_grant_amount`. The controller cannot chunk a smooth grant (one answer is one run of
 * consecutive slots; chunks interleaved with other requests would scatter them), so the client
 * splits instead: it asks for at most `max_grant_amount` at a time — a larger `throttle(n)` takes
 * several answers — and the controller reconsiders classes between answers, as it does between
 * chunks of a plain throttler.
 */
export function smoothPrefetchWindow(throttler: SmoothWindowFields): PrefetchWindow {
  const window = prefetchWindow(throttler);
  // One answer spans at most a second of slots: the controller's start gap is one answer long
  // (see maxPacedAnswer in @sluice/core, which must agree).
  const spanned = prefetchWindow({ ...throttler, request_period: Math.min(throttler.request_period, SMOOTH_MAX_ANSWER_SPAN_MS) });
  const cap = Math.min(window.maxPrefetchAmount, spanned.maxPrefetchAmount, throttler.max_grant_amount ?? Number.POSITIVE_INFINITY);
  // Every RPC wakes both event loops a few times, and a smooth client already wakes for its slots:
  // a client that shares the rate asks about once per answer span (a second) rather than once per
  // request_period, so its answers are that much longer, within the cap. A client whose share
  // fills the cap still asks once per request_period. (Group 7 of the bench: 0.95 → ~0.5 RPCs per
  // client per request_period of 500 ms, and the controller's CPU with them.)
  const targetRps = 1000 / Math.max(throttler.request_period, SMOOTH_MAX_ANSWER_SPAN_MS);
  return { ...window, targetRps, maxPrefetchAmount: cap };
}

export type ClientConfigFields = SmoothWindowFields & Pick<ThrottlerSpec, "retrying_channel" | "rpc_timeout" | "smooth" | "period">;

/**
 * True iff a client built for `a` serves `b` unchanged: same prefetch window, retrying channel and
 * rpc_timeout and shaping (docs/design.md §9.9; a smooth client paces what it hands out, §11.1). Then the client — and the quota it prefetched — is kept across a
 * reconfiguration; `period`, weights and `max_grant_amount` apply on the controller only (except that
 * a smooth client caps its answers at `max_grant_amount`: see smoothPrefetchWindow). Under
 * `use_class_weights_as_limit` a weight change matters only if it resizes the prefetch window.
 */
export function clientConfigEquals(a: ClientConfigFields, b: ClientConfigFields): boolean {
  const windowA = a.smooth ? smoothPrefetchWindow(a) : prefetchWindow(a);
  const windowB = b.smooth ? smoothPrefetchWindow(b) : prefetchWindow(b);
  return (
    windowA.targetRps === windowB.targetRps &&
    windowA.minPrefetchAmount === windowB.minPrefetchAmount &&
    windowA.maxPrefetchAmount === windowB.maxPrefetchAmount &&
    windowA.windowMs === windowB.windowMs &&
    a.rpc_timeout === b.rpc_timeout &&
    a.smooth === b.smooth &&
    // A smooth client also checks its own callers' departures against limit × period (PacedConfig.window).
    (!a.smooth || (effectiveLimit(a) === effectiveLimit(b) && a.period === b.period)) &&
    retryingChannelEquals(a.retrying_channel, b.retrying_channel)
  );
}

function retryingChannelEquals(a: ThrottlerSpec["retrying_channel"], b: ThrottlerSpec["retrying_channel"]): boolean {
  return (
    a.retry_attempts === b.retry_attempts &&
    a.enable_exponential_retry_backoffs === b.enable_exponential_retry_backoffs &&
    a.retry_timeout === b.retry_timeout &&
    a.retry_backoff_time === b.retry_backoff_time &&
    a.min_backoff === b.min_backoff &&
    a.max_backoff === b.max_backoff &&
    a.backoff_multiplier === b.backoff_multiplier &&
    a.backoff_jitter === b.backoff_jitter
  );
}
