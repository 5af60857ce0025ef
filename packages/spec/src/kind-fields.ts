import type * as z from "zod";
import { THROTTLER_DEFAULTS } from "./defaults.ts";
import { parseDuration } from "./duration.ts";

// Fields that mean nothing for a throttler's kind (docs/design.md §11.2): `period`, `smooth` and
// `use_class_weights_as_limit` shape a token bucket, `lease_timeout` is how long a concurrency
// holder may go without renewing. The refinement sees the parsed throttler, where every default is
// filled in (and the controller sends parsed specs to workers, which validate them again), so it
// refuses a field only when it differs from its default: that is a setting the kind would ignore.

const PERIOD_DEFAULT_MS = parseDuration(THROTTLER_DEFAULTS.period);
const LEASE_DEFAULT_MS = parseDuration(THROTTLER_DEFAULTS.lease_timeout);

export function checkKindFields(value: Record<string, unknown>, ctx: z.core.$RefinementCtx): void {
  const kind = value["kind"];
  const id = "this throttler";
  if (kind === "concurrency") {
    const ignored: [string, boolean][] = [
      ["period", typeof value["period"] === "number" && value["period"] !== PERIOD_DEFAULT_MS],
      ["smooth", value["smooth"] === true],
      ["use_class_weights_as_limit", value["use_class_weights_as_limit"] === true],
    ];
    for (const [key, set] of ignored) {
      if (!set) continue;
      ctx.addIssue({
        code: "custom",
        path: [key],
        input: value[key],
        message:
          `${key} does not apply to a concurrency throttler (${id} counts units in use at once, not a rate over a window); ` +
          `remove ${key}, or set "kind": "rate"`,
      });
    }
  } else if (kind === "rate" && typeof value["lease_timeout"] === "number" && value["lease_timeout"] !== LEASE_DEFAULT_MS) {
    ctx.addIssue({
      code: "custom",
      path: ["lease_timeout"],
      input: value["lease_timeout"],
      message: `lease_timeout applies only to concurrency throttlers (${id} is a rate throttler); remove it, or set "kind": "concurrency"`,
    });
  }
}
