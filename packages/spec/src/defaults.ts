// Every default of the pipeline spec, in one place and in the spelling a user writes in JSON. The
// schemas apply them with `.prefault(...)`, so a default is parsed exactly like user input (a
// duration default such as "10s" becomes 10000 ms) and the JSON Schema shows the JSON spelling.
// Sources: docs/design.md §8–§8.2 and reference/ytflow.md §2.1 (TDynamicThrottlerSpec defaults).

export const THROTTLER_DEFAULTS = Object.freeze({
  kind: "rate",
  /** Concurrency throttlers only (docs/design.md §11.2). */
  lease_timeout: "30s",
  /** null = unlimited (the reference's `Limit` is an optional double). */
  limit: null,
  period: "10s",
  request_period: "5s",
  rpc_timeout: "30s",
  /** null = no cap on one server chunk. */
  max_grant_amount: null,
  use_class_weights_as_limit: false,
  max_queue_size: 10_000,
  /** Shaping off: the token bucket allows bursts up to limit × period (docs/design.md §11.1). */
  smooth: false,
});

/** Generous on purpose: a client rides out a controller restart instead of failing its job. */
export const RETRYING_CHANNEL_DEFAULTS = Object.freeze({
  retry_attempts: 100,
  enable_exponential_retry_backoffs: true,
  retry_timeout: "10m",
  retry_backoff_time: "3s",
  min_backoff: "1s",
  max_backoff: "5s",
  backoff_multiplier: 1.5,
  backoff_jitter: 0.1,
});

/** `adaptive` (docs/design.md §11.3); initial_limit defaults to min_limit, max_limit has no default. */
export const ADAPTIVE_DEFAULTS = Object.freeze({
  min_limit: 1,
  interval: "5s",
  dry_run: false,
});

export const THROTTLER_CLASS_DEFAULTS = Object.freeze({
  weight: 1.0,
});

export const STREAM_DEFAULTS = Object.freeze({
  format: "json",
  partitions: 1,
  stream_delay: 0,
});

export const KAFKA_DEFAULTS = Object.freeze({
  session_timeout: "30s",
});

/** `controller` (docs/design.md §5.3): what one client may hold open on a controller. */
export const CONTROLLER_DEFAULTS = Object.freeze({
  max_open_calls_per_stream: 4_096,
});

export const COMPUTATION_DEFAULTS = Object.freeze({
  max_rows_per_batch: 100,
  delivery: "at_least_once" as const,
});

/** `computations.<name>.watermark_alignment` (docs/design.md §12); group name and drift bound as in YT Flow. */
export const WATERMARK_ALIGNMENT_DEFAULTS = Object.freeze({
  group_name: "default-alignment-group",
  drift_bound: "20m",
  idle_timeout: "30s",
});

/** `throttlers.<id>.keyed` (docs/design.md §11.4): `"keyed": {}` takes every one of these. */
export const KEYED_DEFAULTS = Object.freeze({
  max_keys: 100_000,
  idle_timeout: "10m",
  top_keys: 10,
});
