import * as z from "zod";
import { mustBe } from "./rule-error.ts";

interface IntegerBounds {
  readonly min?: number;
  readonly max?: number;
}

/**
 * An integer field whose every failure reads `<field> must be <rule>, got <value>`.
 *
 * Not `z.int()`: zod marks a failed integer check as an explicit abort, which would also stop the
 * cross-reference refinements of every enclosing object — and those must still run so that all
 * issues are reported at once. The JSON Schema still says `"type": "integer"`.
 */
export function integer(rule: string, bounds: IntegerBounds = {}) {
  const error = mustBe(rule);
  let schema = z.number({ error }).refine(Number.isSafeInteger, { error });
  if (bounds.min !== undefined) schema = schema.min(bounds.min);
  if (bounds.max !== undefined) schema = schema.max(bounds.max);
  return schema.meta({ type: "integer" });
}
