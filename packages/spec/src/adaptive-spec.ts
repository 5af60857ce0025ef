import * as z from "zod";
import { DESPITE_INNER_ISSUES, isPlainObject } from "./cross-check.ts";
import { ADAPTIVE_DEFAULTS } from "./defaults.ts";
import { describeValue } from "./describe-value.ts";
import { duration } from "./duration.ts";
import { mustBe } from "./rule-error.ts";

// `dynamic_spec.throttlers.<id>.adaptive` (docs/design.md §11.3): the limit follows the protected system's
// live load instead of being a fixed number. Rules that involve only the adaptive block live here;
// the exclusion of a fixed `limit` is checked by the throttler schema, which sees both.

function httpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

const prometheusLoadSchema = z
  .strictObject(
    {
      url: z
        .string({ error: mustBe('an http(s) URL of a Prometheus server such as "http://127.0.0.1:9090"') })
        .refine(httpUrl, { error: mustBe('an http(s) URL of a Prometheus server such as "http://127.0.0.1:9090"') })
        .describe("Base URL of the Prometheus server; the loop calls <url>/api/v1/query."),
      query: z
        .string({ error: mustBe("a PromQL expression returning one number") })
        .min(1, { error: mustBe("a PromQL expression returning one number (not empty)") })
        .describe("PromQL instant query whose single result is the load as a fraction of capacity."),
    },
    { error: mustBe('an object { "url": ..., "query": ... }') },
  )
  .describe("Load from a Prometheus instant query over its HTTP API.");

const loadSchema = z
  .strictObject(
    {
      prometheus: prometheusLoadSchema.optional(),
      module: z
        .string({ error: mustBe("a path to a module whose default export returns the load") })
        .min(1, { error: mustBe("a path to a module whose default export returns the load (not empty)") })
        .optional()
        .describe("Module (relative to the spec file) whose default export `() => number | Promise<number>` returns the load."),
    },
    { error: mustBe('an object with either "prometheus" or "module"') },
  )
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value)) return;
    const has = (key: string) => value[key] !== undefined;
    if (has("prometheus") && has("module")) {
      ctx.addIssue({
        code: "custom",
        path: ["module"],
        input: value["module"],
        message: 'load takes either "prometheus" or "module", not both; remove one of them',
      });
    } else if (!has("prometheus") && !has("module")) {
      ctx.addIssue({
        code: "custom",
        path: [],
        input: value,
        message: 'load needs a source: { "prometheus": { "url", "query" } } or { "module": "./load.ts" }',
      });
    }
  }, DESPITE_INNER_ISSUES)
  .describe('Where the load comes from: { "prometheus": { "url", "query" } } or { "module": "./load.ts" }.');

const fraction = (rule: string) => z.number({ error: mustBe(rule) }).min(0);

const targetSchema = z
  .strictObject(
    {
      low: fraction("a finite number ≥ 0 (a load as a fraction of capacity)").describe(
        "Lower edge of the band: below it the limit climbs while demand exists.",
      ),
      high: fraction("a finite number ≥ 0 (a load as a fraction of capacity)").describe("Upper edge of the band: above it the limit is cut."),
    },
    { error: mustBe('an object such as { "low": 0.90, "high": 0.95 }') },
  )
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value)) return;
    const { low, high } = value;
    if (typeof low === "number" && typeof high === "number" && !(low < high)) {
      ctx.addIssue({
        code: "custom",
        path: ["high"],
        input: high,
        message: `target.high (${high}) must be greater than target.low (${low}): the band the loop holds the load in would be empty`,
      });
    }
  }, DESPITE_INNER_ISSUES)
  .describe("The band [low, high] the loop holds the load inside.");

const limitRule = "a finite number greater than 0";
const positiveLimit = () => z.number({ error: mustBe(limitRule) }).gt(0);

export const adaptiveSpecSchema = z
  .strictObject(
    {
      load: loadSchema,
      target: targetSchema,
      initial_limit: positiveLimit().optional().describe("Limit in force when the loop starts (slow start climbs from here). Default min_limit."),
      min_limit: positiveLimit()
        .prefault(ADAPTIVE_DEFAULTS.min_limit)
        .describe(`Lowest limit the loop sets; also the fallback after repeated failed readings. Default ${ADAPTIVE_DEFAULTS.min_limit}.`),
      max_limit: positiveLimit().describe("Highest limit the loop sets. Required: a loop without a ceiling is a fixed limit of infinity."),
      interval: duration({ minMs: 100 })
        .prefault(ADAPTIVE_DEFAULTS.interval)
        .describe(`How often the load is read and the limit moved. At least 100ms. Default "${ADAPTIVE_DEFAULTS.interval}".`),
      dry_run: z
        .boolean({ error: mustBe("true or false") })
        .prefault(ADAPTIVE_DEFAULTS.dry_run)
        .describe(
          "Compute and export the limit the loop would set without applying it; the limit in force stays where it was " +
            "(initial_limit when the loop starts in dry run). " +
            `Default ${ADAPTIVE_DEFAULTS.dry_run}.`,
        ),
    },
    { error: mustBe("an object with load, target, max_limit and optional initial_limit, min_limit, interval, dry_run") },
  )
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value)) return;
    const { min_limit: min, max_limit: max, initial_limit: initial } = value;
    const minLimit = typeof min === "number" ? min : ADAPTIVE_DEFAULTS.min_limit;
    if (typeof max === "number" && max < minLimit) {
      ctx.addIssue({
        code: "custom",
        path: ["max_limit"],
        input: max,
        message: `max_limit (${max}) must be at least min_limit (${minLimit})`,
      });
    }
    if (typeof initial === "number" && typeof max === "number" && (initial < minLimit || initial > max)) {
      ctx.addIssue({
        code: "custom",
        path: ["initial_limit"],
        input: initial,
        message: `initial_limit must be within [min_limit, max_limit] = [${minLimit}, ${max}], got ${describeValue(initial)}`,
      });
    }
  }, DESPITE_INNER_ISSUES)
  .describe("Adaptive limit (docs/design.md §11.3): the limit follows the live load of the protected system.");

export type AdaptiveSpec = z.output<typeof adaptiveSpecSchema>;
export type AdaptiveSpecInput = z.input<typeof adaptiveSpecSchema>;

/** initial_limit, or min_limit when it is not given. */
export function initialLimitOf(adaptive: AdaptiveSpec): number {
  return adaptive.initial_limit ?? adaptive.min_limit;
}
