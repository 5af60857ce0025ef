import { isPlainObject } from "./cross-check.ts";

/**
 * `sluice reconfigure` accepts either a whole pipeline spec or just its dynamic_spec. A whole spec is
 * recognised by `pipeline`, `streams` or `dynamic_spec` — not by `computations`, which a bare
 * dynamic_spec has too. A whole spec without `dynamic_spec` yields `{}`, the default (no throttlers).
 */
export function extractDynamicSpec(input: unknown): unknown {
  if (!isPlainObject(input)) return input;
  const isPipeline = ["pipeline", "streams", "dynamic_spec"].some((key) => Object.hasOwn(input, key));
  if (!isPipeline) return input;
  return input["dynamic_spec"] ?? {};
}
