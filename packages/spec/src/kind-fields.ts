import { isPlainObject } from "./cross-check.ts";
import type { IssuePathSegment } from "./issue-path.ts";

// Fields that mean nothing for a throttler's kind (DESIGN §7.2): `period` and `smooth` shape a token
// bucket's window, `lease_timeout` is how long a concurrency holder may go without renewing. The
// parsed spec carries every default, so whether a user *wrote* one can only be seen in the raw
// input: validate.ts runs this beside the schema so that all issues are still reported at once.

const RATE_ONLY = ["period", "smooth", "use_class_weights_as_limit"] as const;
const CONCURRENCY_ONLY = ["lease_timeout"] as const;

export interface KindIssue {
  readonly path: readonly IssuePathSegment[];
  readonly message: string;
}

/** Issues for `throttlers` (the raw `dynamic_spec.throttlers` object), paths relative to it. */
export function kindFieldIssues(throttlers: unknown): KindIssue[] {
  if (!isPlainObject(throttlers)) return [];
  const issues: KindIssue[] = [];
  for (const [id, throttler] of Object.entries(throttlers)) {
    if (!isPlainObject(throttler)) continue;
    const kind = throttler["kind"] ?? "rate";
    if (kind === "concurrency") {
      for (const key of RATE_ONLY) {
        if (!Object.hasOwn(throttler, key)) continue;
        issues.push({
          path: [id, key],
          message:
            `${key} does not apply to a concurrency throttler (throttler "${id}": its limit is units in use at once, not a rate ` +
            `over a window); remove ${key}, or set "kind": "rate"`,
        });
      }
    } else if (kind === "rate") {
      for (const key of CONCURRENCY_ONLY) {
        if (!Object.hasOwn(throttler, key)) continue;
        issues.push({
          path: [id, key],
          message: `${key} applies only to concurrency throttlers (throttler "${id}" is a rate throttler); remove it, or set "kind": "concurrency"`,
        });
      }
    }
  }
  return issues;
}
