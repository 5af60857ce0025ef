import * as z from "zod";
import { adaptiveSpecSchema } from "./adaptive-spec.ts";
import { checkKindFields } from "./kind-fields.ts";
import { DESPITE_INNER_ISSUES, isPlainObject } from "./cross-check.ts";
import { RETRYING_CHANNEL_DEFAULTS, THROTTLER_DEFAULTS } from "./defaults.ts";
import { keyedSpecSchema } from "./keyed-spec.ts";
import { checkKeyed } from "./keyed-check.ts";
import { DEFAULT_CLASS_ID, throttlerClassIdSchema, throttlerClassSpecSchema } from "./throttler-class-spec.ts";
import { describeValue } from "./describe-value.ts";
import { duration } from "./duration.ts";
import { integer } from "./integer.ts";
import { mustBe } from "./rule-error.ts";

// `dynamic_spec.throttlers.<id>` (docs/design.md §8.1; reference: TDynamicThrottlerSpec, ytflow.md §2.1).
// Rules that involve only one throttler live here, so parsing a throttler spec on its own enforces
// them; references between throttlers and computations are checked in dynamic-spec.ts.

export const THROTTLER_KINDS = ["rate", "concurrency"] as const;
export type ThrottlerKind = (typeof THROTTLER_KINDS)[number];

export { DEFAULT_CLASS_ID, MAX_CLASS_WEIGHT, MIN_CLASS_WEIGHT, throttlerClassIdSchema, throttlerClassSpecSchema } from "./throttler-class-spec.ts";

const retryDefaults = RETRYING_CHANNEL_DEFAULTS;

export const retryingChannelSpecSchema = z
  .strictObject(
    {
      retry_attempts: integer("an integer ≥ 1", { min: 1 })
        .prefault(retryDefaults.retry_attempts)
        .describe(`Attempts of one RequestQuota call before throttle() fails with RETRIES_EXHAUSTED. Default ${retryDefaults.retry_attempts}.`),
      enable_exponential_retry_backoffs: z
        .boolean({ error: mustBe("true or false") })
        .prefault(retryDefaults.enable_exponential_retry_backoffs)
        .describe(
          "Back off exponentially (min_backoff × backoff_multiplier^n up to max_backoff, with jitter) between retries; " +
            `false waits retry_backoff_time each time. Default ${retryDefaults.enable_exponential_retry_backoffs}.`,
        ),
      retry_timeout: duration({ minMs: 0, exclusive: true })
        .prefault(retryDefaults.retry_timeout)
        .describe(
          `Total time budget of one call across retries; once spent, throttle() fails with RETRIES_EXHAUSTED. Default "${retryDefaults.retry_timeout}".`,
        ),
      retry_backoff_time: duration()
        .prefault(retryDefaults.retry_backoff_time)
        .describe(`Pause between retries when exponential backoff is off. Default "${retryDefaults.retry_backoff_time}".`),
      min_backoff: duration().prefault(retryDefaults.min_backoff).describe(`First exponential backoff. Default "${retryDefaults.min_backoff}".`),
      max_backoff: duration()
        .prefault(retryDefaults.max_backoff)
        .describe(`Largest exponential backoff; at least min_backoff. Default "${retryDefaults.max_backoff}".`),
      backoff_multiplier: z
        .number({ error: mustBe("a finite number ≥ 1") })
        .min(1)
        .prefault(retryDefaults.backoff_multiplier)
        .describe(`Growth factor of the exponential backoff. Default ${retryDefaults.backoff_multiplier}.`),
      backoff_jitter: z
        .number({ error: mustBe("a number within [0, 1]") })
        .min(0)
        .max(1)
        .prefault(retryDefaults.backoff_jitter)
        .describe(`Random spread of each backoff, as a fraction of it. Default ${retryDefaults.backoff_jitter}.`),
    },
    { error: mustBe("an object") },
  )
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value)) return;
    const { min_backoff: minMs, max_backoff: maxMs } = value;
    if (typeof minMs === "number" && typeof maxMs === "number" && maxMs < minMs) {
      ctx.addIssue({
        code: "custom",
        path: ["max_backoff"],
        input: maxMs,
        message: `max_backoff (${maxMs}ms) must be at least min_backoff (${minMs}ms)`,
      });
    }
  }, DESPITE_INNER_ISSUES)
  .describe("Client retries of RequestQuota while the controller is unreachable (docs/design.md §9.8).");

const throttlerDefaults = THROTTLER_DEFAULTS;

export const throttlerSpecSchema = z
  .strictObject(
    {
      kind: z
        .enum(THROTTLER_KINDS, { error: mustBe('"rate" or "concurrency"') })
        .prefault(throttlerDefaults.kind)
        .describe(
          '"rate": a token bucket, limit = units per second. "concurrency": limit = units in use at once, given back by ' +
            `release, when the holder ends, or after lease_timeout without renewal (docs/design.md §11.2). Default "${throttlerDefaults.kind}".`,
        ),
      lease_timeout: duration({ minMs: 0, exclusive: true })
        .prefault(throttlerDefaults.lease_timeout)
        .describe(
          "Concurrency throttlers: units a client holds come back after this long without renewal (a crashed holder never " +
            `leaks capacity for good). Default "${throttlerDefaults.lease_timeout}".`,
        ),
      limit: z
        .number({ error: mustBe("a finite number ≥ 0, or null for unlimited") })
        .min(0)
        .nullable()
        .prefault(throttlerDefaults.limit)
        .describe(
          "Units per second emitted by the bucket (rows or bytes, whichever the throttler meters). " +
            "Absent or null = unlimited; 0 grants nothing. Excludes use_class_weights_as_limit.",
        ),
      period: duration({ minMs: 1 })
        .prefault(throttlerDefaults.period)
        .describe(`Bucket window: capacity and largest burst = limit × period. At least 1ms. Default "${throttlerDefaults.period}".`),
      request_period: duration({ minMs: 1 })
        .prefault(throttlerDefaults.request_period)
        .describe(
          "How often a client refills its local pool; the prefetch window is about limit × request_period. " +
            `At least 1ms. Default "${throttlerDefaults.request_period}".`,
        ),
      rpc_timeout: duration({ minMs: 0, exclusive: true })
        .prefault(throttlerDefaults.rpc_timeout)
        .describe(`Deadline of one RequestQuota call. Default "${throttlerDefaults.rpc_timeout}".`),
      retrying_channel: retryingChannelSpecSchema
        .prefault({})
        .describe(
          "Client retries of RequestQuota; the budget after which throttle() fails. Each field has its own default: " +
            `retry_attempts ${retryDefaults.retry_attempts}, enable_exponential_retry_backoffs ${retryDefaults.enable_exponential_retry_backoffs}, ` +
            `retry_timeout "${retryDefaults.retry_timeout}", retry_backoff_time "${retryDefaults.retry_backoff_time}", min_backoff "${retryDefaults.min_backoff}", ` +
            `max_backoff "${retryDefaults.max_backoff}", backoff_multiplier ${retryDefaults.backoff_multiplier}, backoff_jitter ${retryDefaults.backoff_jitter}.`,
        ),
      // At least 1, as the reference requires (an i64 > 0): a smaller chunk only multiplies the grant
      // loop's work, and below the rounding step of a large remaining amount it would make no progress.
      max_grant_amount: z
        .number({ error: mustBe("a finite number ≥ 1 (the smallest chunk worth granting), or null for no cap") })
        .min(1)
        .nullable()
        .prefault(throttlerDefaults.max_grant_amount)
        .describe(
          "Largest chunk the controller grants at once; a larger request is served chunk by chunk and the " +
            "class scheduler reconsiders classes after each chunk. At least 1. Absent = no cap.",
        ),
      classes: z
        .record(throttlerClassIdSchema, throttlerClassSpecSchema, { error: mustBe("an object of class id → { weight }") })
        .prefault({})
        .describe(`Weighted quota classes by id. "${DEFAULT_CLASS_ID}" (weight 1.0) always exists implicitly and cannot be declared.`),
      use_class_weights_as_limit: z
        .boolean({ error: mustBe("true or false") })
        .prefault(throttlerDefaults.use_class_weights_as_limit)
        .describe(
          "Bucket rate = sum of the declared class weights (units per second); each weight is then a floor " +
            `under contention. Needs at least one class; excludes limit. Default ${throttlerDefaults.use_class_weights_as_limit}.`,
        ),
      max_queue_size: integer("an integer ≥ 1", { min: 1 })
        .prefault(throttlerDefaults.max_queue_size)
        .describe(`Requests that may wait on this throttler; one more is refused at once (QUEUE_FULL). Default ${throttlerDefaults.max_queue_size}.`),
      adaptive: adaptiveSpecSchema
        .optional()
        .describe(
          "Adaptive limit (docs/design.md §11.3) instead of a fixed limit: the controller moves the limit to hold the load of the protected system inside a band.",
        ),
      smooth: z
        .boolean({ error: mustBe("true or false") })
        .prefault(throttlerDefaults.smooth)
        .describe(
          "Shaping (docs/design.md §11.1): in every closed window of length period at most limit × period units reach callers, " +
            "spread about 1/limit apart, summed over every client; the controller paces grants at 96 % of the limit. " +
            `Needs a limit (or use_class_weights_as_limit). Default ${throttlerDefaults.smooth}.`,
        ),
      keyed: keyedSpecSchema
        .optional()
        .describe(
          "Keyed throttler (docs/design.md §11.4): the throttler is a template and every key (a customer, a model, a host; 1 to 256 " +
            'UTF-8 bytes) gets a bucket of its own, created on its first request. Callers use forKey(key). "keyed": {} takes every default.',
        ),
    },
    { error: mustBe("an object") },
  )
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value)) return;
    checkAdaptiveExclusions(value, ctx);
    checkKindFields(value, ctx);
    checkKeyed(value, ctx);
    if (value["smooth"] !== true || value["use_class_weights_as_limit"] === true || value["adaptive"] !== undefined) return;
    const limit = value["limit"];
    if (limit === null || limit === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["smooth"],
        input: true,
        message:
          "smooth needs a limit: it paces the units at the throttler's rate, and an unlimited throttler has none; " +
          "set limit (units per second), adaptive or use_class_weights_as_limit, or remove smooth",
      });
    }
  }, DESPITE_INNER_ISSUES)
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value) || value["use_class_weights_as_limit"] !== true) return;
    const classes = value["classes"];
    if (isPlainObject(classes) && Object.keys(classes).length === 0) {
      ctx.addIssue({
        code: "custom",
        path: ["use_class_weights_as_limit"],
        input: true,
        message: "use_class_weights_as_limit needs at least one class in classes: the bucket rate is the sum of the class weights",
      });
    }
    const limit = value["limit"];
    if (limit !== null && limit !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["limit"],
        input: limit,
        message:
          `limit must not be set when use_class_weights_as_limit is true (the rate is the sum of the class weights), ` +
          `got ${describeValue(limit)}; remove limit or set use_class_weights_as_limit to false`,
      });
    }
  }, DESPITE_INNER_ISSUES)
  .describe("A named distributed throttler: one token bucket on the controller, metering rows or bytes.");

/** `adaptive` sets the limit itself: a fixed limit or a weight-sum limit beside it would be ignored. */
function checkAdaptiveExclusions(value: Record<string, unknown>, ctx: z.core.$RefinementCtx): void {
  if (value["adaptive"] === undefined) return;
  const limit = value["limit"];
  if (limit !== null && limit !== undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["limit"],
      input: limit,
      message:
        `limit must not be set together with adaptive (the adaptive loop sets the limit between min_limit and max_limit), ` +
        `got ${describeValue(limit)}; remove limit, or remove adaptive to keep a fixed limit`,
    });
  }
  if (value["use_class_weights_as_limit"] === true) {
    ctx.addIssue({
      code: "custom",
      path: ["use_class_weights_as_limit"],
      input: true,
      message: "use_class_weights_as_limit cannot be combined with adaptive: both would set the throttler's limit; keep one",
    });
  }
}

export type ThrottlerSpec = z.output<typeof throttlerSpecSchema>;
export type ThrottlerSpecInput = z.input<typeof throttlerSpecSchema>;
export type ThrottlerClassSpec = z.output<typeof throttlerClassSpecSchema>;
export type RetryingChannelSpec = z.output<typeof retryingChannelSpecSchema>;
