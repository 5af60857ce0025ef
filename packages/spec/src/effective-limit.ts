import type { ThrottlerSpec } from "./throttler-spec.ts";

export type LimitFields = Pick<ThrottlerSpec, "limit" | "use_class_weights_as_limit" | "classes">;

/**
 * The bucket's rate in units per second, or null for unlimited. Under `use_class_weights_as_limit`
 * it is the sum of the declared class weights (docs/design.md §9.6); the implicit default class adds nothing
 * to it — classless traffic competes on top.
 */
export function effectiveLimit(throttler: LimitFields): number | null {
  if (!throttler.use_class_weights_as_limit) return throttler.limit;
  let sum = 0;
  for (const { weight } of Object.values(throttler.classes)) sum += weight;
  return sum;
}
