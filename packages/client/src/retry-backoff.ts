import type { RetryingChannelSpec } from "@sluice/spec";

/**
 * Pause before retry number `attempt` (1 = the first retry) of a RequestQuota call: exponential
 * (min_backoff × backoff_multiplier^(attempt-1), capped at max_backoff) or a fixed
 * retry_backoff_time, spread by ±backoff_jitter so clients of a restarted controller do not all
 * come back in the same millisecond.
 */
export function retryBackoffMs(channel: RetryingChannelSpec, attempt: number, random: () => number = Math.random): number {
  const base = channel.enable_exponential_retry_backoffs
    ? Math.min(channel.max_backoff, channel.min_backoff * channel.backoff_multiplier ** Math.max(0, attempt - 1))
    : channel.retry_backoff_time;
  const spread = base * channel.backoff_jitter;
  return Math.max(0, base - spread + 2 * spread * random());
}
