import * as z from "zod";
import { KEYED_DEFAULTS } from "./defaults.ts";
import { duration } from "./duration.ts";
import { integer } from "./integer.ts";
import { mustBe } from "./rule-error.ts";
import { throttlerClassIdSchema, throttlerClassSpecSchema } from "./throttler-class-spec.ts";

// `dynamic_spec.throttlers.<id>.keyed` (docs/design.md §11.4): the throttler becomes a template, and every
// key (a customer, a model, a host) gets a bucket of its own with the throttler's fields.

/** A key is at most this many UTF-8 bytes: it travels in every request and names a bucket. */
export const MAX_KEY_BYTES = 256;

/** Why `key` cannot name a bucket, with the figures; null when it can. */
export function keyProblem(key: string): string | null {
  if (key === "") return "the key is empty; a key names one customer, model or host and has 1 to 256 UTF-8 bytes";
  const bytes = Buffer.byteLength(key, "utf8");
  if (bytes > MAX_KEY_BYTES) {
    return `the key has ${bytes} UTF-8 bytes (${JSON.stringify(key.slice(0, 32))}…), more than the ${MAX_KEY_BYTES} a key may have`;
  }
  return null;
}

/** The fields an override may set; every other field of a key's bucket is the template's. */
export const KEY_OVERRIDE_FIELDS = ["limit", "period", "smooth", "lease_timeout", "classes"] as const;

const keyName = z.string().refine((key) => keyProblem(key) === null, {
  error: (issue) => `override key: ${keyProblem(String(issue.input)) ?? "invalid"}`,
});

/**
 * One key's exceptions: the throttler's own fields, without defaults (a field left out is the
 * template's). Whether the merged fields make a valid throttler is checked by keyed-check.ts.
 */
export const keyOverrideSchema = z
  .strictObject(
    {
      limit: z
        .number({ error: mustBe("a finite number ≥ 0, or null for unlimited") })
        .min(0)
        .nullable()
        .optional()
        .describe("This key's limit instead of the template's."),
      period: duration({ minMs: 1 }).optional().describe("This key's period instead of the template's."),
      smooth: z
        .boolean({ error: mustBe("true or false") })
        .optional()
        .describe("This key's smooth instead of the template's."),
      lease_timeout: duration({ minMs: 0, exclusive: true }).optional().describe("This key's lease_timeout instead of the template's."),
      classes: z
        .record(throttlerClassIdSchema, throttlerClassSpecSchema, { error: mustBe("an object of class id → { weight }") })
        .optional()
        .describe("This key's classes instead of the template's."),
    },
    { error: mustBe(`an object of some of ${KEY_OVERRIDE_FIELDS.join(", ")}`) },
  )
  .describe(`Per-key values of ${KEY_OVERRIDE_FIELDS.join(", ")}; the other fields are the template's.`);

export const keyedSpecSchema = z
  .strictObject(
    {
      max_keys: integer("an integer ≥ 1", { min: 1 })
        .prefault(KEYED_DEFAULTS.max_keys)
        .describe(
          "Live keys at most; a request for one more new key is refused at once with TOO_MANY_KEYS (no live key is " +
            `dropped to make room). Default ${KEYED_DEFAULTS.max_keys}.`,
        ),
      idle_timeout: duration({ minMs: 0, exclusive: true })
        .prefault(KEYED_DEFAULTS.idle_timeout)
        .describe(
          "A key with no request for this long is forgotten, but only when forgetting grants nothing: its rate bucket is " +
            `full and it holds no units. Default "${KEYED_DEFAULTS.idle_timeout}".`,
        ),
      overrides: z
        .record(keyName, keyOverrideSchema, { error: mustBe("an object of key → override") })
        .prefault({})
        .describe(`Per-key exceptions by key: ${KEY_OVERRIDE_FIELDS.join(", ")}. Changed live like any field. Default {}.`),
      top_keys: integer("an integer ≥ 0", { min: 0 })
        .prefault(KEYED_DEFAULTS.top_keys)
        .describe(`Keys shown by wait time over the last minute on /metrics (one series each) and in sluice top. Default ${KEYED_DEFAULTS.top_keys}.`),
    },
    { error: mustBe('an object such as { "max_keys": 100000 } ({} takes every default)') },
  )
  .describe("Keyed throttler (docs/design.md §11.4): a bucket per key, created on its first request, with the throttler's fields.");

export type KeyedSpec = z.output<typeof keyedSpecSchema>;
export type KeyOverride = z.output<typeof keyOverrideSchema>;

/** The fields of `key`'s bucket: the template's, with the key's override on top (parsed values, ms). */
export function keyOverrideOf(keyed: KeyedSpec, key: string): KeyOverride | undefined {
  return Object.hasOwn(keyed.overrides, key) ? keyed.overrides[key] : undefined;
}

/**
 * The throttler `key`'s bucket is: the template with the key's override on top (parsed values). The
 * result's `keyed` is the template's, so it is still recognisably a key of a keyed throttler.
 */
export function keyThrottlerSpec<T extends { readonly keyed?: KeyedSpec | undefined }>(throttler: T, key: string): T {
  const override = throttler.keyed ? keyOverrideOf(throttler.keyed, key) : undefined;
  if (!override) return throttler;
  const set = Object.fromEntries(Object.entries(override).filter(([, value]) => value !== undefined));
  return { ...throttler, ...set };
}
