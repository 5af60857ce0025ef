import * as z from "zod";
import { THROTTLER_CLASS_DEFAULTS } from "./defaults.ts";
import { MAX_ID_LENGTH } from "./id-length.ts";
import { mustBe } from "./rule-error.ts";

// The weighted quota classes of a throttler (docs/design.md §9.2), shared by the throttler and its keys'
// overrides (keyed-spec.ts).

/** The class every request without (or with an unknown) class id falls into; weight 1.0, implicit. */
export const DEFAULT_CLASS_ID = "default";

/**
 * Weights outside this range are refused: a denormal weight overflows `amount / weight` to infinity
 * and the scheduler's renormalisation would turn every class's virtual time into NaN (ytflow.md
 * §2.1, ValidateQuotaClassWeight; the reference's numeric bounds are not public, these are Sluice's).
 */
export const MIN_CLASS_WEIGHT = 1e-6;
export const MAX_CLASS_WEIGHT = 1e6;

export const throttlerClassIdSchema = z
  .string()
  .min(1, { error: "class id must not be empty" })
  .max(MAX_ID_LENGTH, { error: `class id must be at most ${MAX_ID_LENGTH} characters` })
  .refine((id) => id !== DEFAULT_CLASS_ID, {
    error: `"${DEFAULT_CLASS_ID}" is reserved for the implicit class; choose another class id`,
  });

const weightRange = `within [${MIN_CLASS_WEIGHT}, ${MAX_CLASS_WEIGHT}]`;
const positiveWeight = mustBe("a finite number greater than 0");
const weightInRange = mustBe(weightRange);

/** Zero, negative and non-finite weights break the rule that matters; tiny or huge ones the range. */
function weightError(issue: z.core.$ZodRawIssue): string | undefined {
  const weight = issue.input;
  const positive = typeof weight === "number" && Number.isFinite(weight) && weight > 0;
  return positive ? weightInRange(issue) : positiveWeight(issue);
}

export const throttlerClassSpecSchema = z
  .strictObject(
    {
      weight: z
        .number({ error: weightError })
        .min(MIN_CLASS_WEIGHT)
        .max(MAX_CLASS_WEIGHT)
        .prefault(THROTTLER_CLASS_DEFAULTS.weight)
        .describe(
          "Share of the throttler among backlogged classes (start-time fair queuing: shares ∝ weights). " +
            "With use_class_weights_as_limit, the class's rate in units per second. " +
            `Finite, within [${MIN_CLASS_WEIGHT}, ${MAX_CLASS_WEIGHT}]. Default ${THROTTLER_CLASS_DEFAULTS.weight}.`,
        ),
    },
    { error: mustBe('an object such as { "weight": 2 }') },
  )
  .describe("A weighted quota class of one throttler.");
