import * as z from "zod";
import { DESPITE_INNER_ISSUES, isPlainObject } from "./cross-check.ts";
import { quoteList } from "./describe-value.ts";
import { MAX_ID_LENGTH } from "./id-length.ts";
import { notDeclaredMessage } from "./not-declared.ts";
import { mustBe } from "./rule-error.ts";
import { DEFAULT_CLASS_ID, throttlerSpecSchema } from "./throttler-spec.ts";

// `dynamic_spec`: the part of a pipeline that can be replaced while it runs (docs/design.md §8, §8.2, §9.9).
// Reference rules: ValidateDynamicPipelineSpec, ytflow.md §2.2.

/** A throttler meters either message count (rows) or serialized size (bytes), never both. */
export const METERS = ["rows", "bytes"] as const;
export type Meter = (typeof METERS)[number];

function throttlerIdKey(meter: Meter) {
  return `input_${meter}_throttler_id` as const;
}
function classIdKey(meter: Meter) {
  return `input_${meter}_throttler_class_id` as const;
}

const idRule = (what: string) =>
  z
    .string({ error: mustBe(`a non-empty ${what}; omit the key to leave it unset`) })
    .min(1)
    .optional();

export const computationDynamicSpecSchema = z
  .strictObject(
    {
      input_rows_throttler_id: idRule("throttler id").describe(
        "Throttler that meters the message count of each batch: the job waits for #messages before every Process iteration.",
      ),
      input_bytes_throttler_id: idRule("throttler id").describe(
        "Throttler that meters the byte size of each batch: the job waits for Σ byteSize before every Process iteration. " +
          "Must differ from input_rows_throttler_id.",
      ),
      input_rows_throttler_class_id: idRule("class id").describe(
        `Quota class of every request this computation makes to its rows throttler (absent = "${DEFAULT_CLASS_ID}"). ` + "Needs input_rows_throttler_id.",
      ),
      input_bytes_throttler_class_id: idRule("class id").describe(
        `Quota class of every request this computation makes to its bytes throttler (absent = "${DEFAULT_CLASS_ID}"). ` + "Needs input_bytes_throttler_id.",
      ),
    },
    { error: mustBe("an object") },
  )
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value)) return;
    for (const meter of METERS) {
      const classKey = classIdKey(meter);
      if (value[classKey] !== undefined && value[throttlerIdKey(meter)] === undefined) {
        ctx.addIssue({
          code: "custom",
          path: [classKey],
          input: value[classKey],
          message: `${classKey} is set but ${throttlerIdKey(meter)} is not; a class only applies to a throttler the computation uses`,
        });
      }
    }
    const rows = value[throttlerIdKey("rows")];
    if (typeof rows === "string" && rows === value[throttlerIdKey("bytes")]) {
      ctx.addIssue({
        code: "custom",
        path: [throttlerIdKey("bytes")],
        input: rows,
        message:
          `throttler ${JSON.stringify(rows)} is referenced by both input_rows_throttler_id and input_bytes_throttler_id; ` +
          "a throttler meters either message count or byte size, not both — declare a second throttler for bytes",
      });
    }
  }, DESPITE_INNER_ISSUES)
  .describe("Dynamic settings of one computation: which throttlers meter its input, and in which class.");

export const dynamicSpecSchema = z
  .strictObject(
    {
      throttlers: z
        .record(
          z
            .string()
            .min(1, { error: "throttler id must not be empty" })
            .max(MAX_ID_LENGTH, { error: `throttler id must be at most ${MAX_ID_LENGTH} characters` }),
          throttlerSpecSchema,
          { error: mustBe("an object of throttler id → throttler") },
        )
        .prefault({})
        .describe("Named distributed throttlers, each one token bucket on the controller. Default {}."),
      computations: z
        .record(z.string(), computationDynamicSpecSchema, { error: mustBe("an object of computation name → settings") })
        .prefault({})
        .describe("Dynamic settings by computation name. Default {}."),
    },
    { error: mustBe("an object") },
  )
  .superRefine((value: unknown, ctx) => {
    if (!isPlainObject(value)) return;
    const { throttlers, computations } = value;
    // Without a readable throttler table nothing can be said about references to it.
    if (!isPlainObject(throttlers) || !isPlainObject(computations)) return;
    for (const [name, computation] of Object.entries(computations)) {
      if (!isPlainObject(computation)) continue;
      for (const meter of METERS) {
        const id = computation[throttlerIdKey(meter)];
        if (typeof id !== "string" || id === "") continue;
        if (!Object.hasOwn(throttlers, id)) {
          ctx.addIssue({
            code: "custom",
            path: ["computations", name, throttlerIdKey(meter)],
            input: id,
            message: notDeclaredMessage("throttler", id, "dynamic_spec.throttlers", Object.keys(throttlers)),
          });
          continue;
        }
        const throttler = throttlers[id];
        if (isPlainObject(throttler) && throttler["keyed"] !== undefined) {
          ctx.addIssue({
            code: "custom",
            path: ["computations", name, throttlerIdKey(meter)],
            input: id,
            message:
              `throttler ${JSON.stringify(id)} is keyed, so it cannot meter a computation's input: the input has no key to ` +
              `pick a bucket with; call forKey(key) on it from the computation's code, or use a throttler without keyed here`,
          });
          continue;
        }
        const classId = computation[classIdKey(meter)];
        if (typeof classId !== "string" || classId === DEFAULT_CLASS_ID || !isPlainObject(throttler)) continue;
        const classes = throttler["classes"];
        if (!isPlainObject(classes) || Object.hasOwn(classes, classId)) continue;
        const declared = Object.keys(classes);
        ctx.addIssue({
          code: "custom",
          path: ["computations", name, classIdKey(meter)],
          input: classId,
          message:
            `class ${JSON.stringify(classId)} is not declared on throttler ${JSON.stringify(id)} ` +
            `(declared: ${declared.length === 0 ? "none" : quoteList(declared)}; "${DEFAULT_CLASS_ID}" is always available)`,
        });
      }
    }
  }, DESPITE_INNER_ISSUES)
  .describe("The part of the pipeline that can be replaced while it runs: throttlers and their use by computations.");

/** Keys of `dynamic_spec.computations` that are not declared computations (paths relative to dynamic_spec). */
export function undeclaredComputations(
  dynamicComputations: Record<string, unknown>,
  declared: readonly string[],
): { path: [string, string]; name: string; message: string }[] {
  const known = new Set(declared);
  return Object.keys(dynamicComputations)
    .filter((name) => !known.has(name))
    .map((name) => ({
      path: ["computations", name],
      name,
      message: notDeclaredMessage("computation", name, "computations", declared),
    }));
}

export type DynamicSpec = z.output<typeof dynamicSpecSchema>;
export type DynamicSpecInput = z.input<typeof dynamicSpecSchema>;
export type ComputationDynamicSpec = z.output<typeof computationDynamicSpecSchema>;
