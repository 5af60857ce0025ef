import type * as z from "zod";
import { describeValue } from "./describe-value.ts";

// Zod error maps that turn any failure of one field into a single sentence naming the field, its rule
// and the bad value: `weight must be a finite number greater than 0, got -1`. A field states its rule
// once (`mustBe("an integer ≥ 1")`) and every way of breaking it — wrong type, NaN, out of range —
// yields that sentence. Zod calls error maps after the whole parse, so `issue.path` is the full path.

type ErrorMap = (issue: z.core.$ZodRawIssue) => string | undefined;

export function mustBe(rule: string, show: (value: unknown) => string = describeValue): ErrorMap {
  return (issue) => {
    // Unknown keys and bad record keys carry their own wording (see validate.ts and the key schemas).
    if (issue.code === "unrecognized_keys" || issue.code === "invalid_key") return undefined;
    const subject = subjectOf(issue.path ?? []);
    if (issue.input === undefined) return `${subject} is required: it must be ${rule}`;
    return `${subject} must be ${rule}, got ${show(issue.input)}`;
  };
}

/** The name a message starts with: the last key of the path, with its array index if any. */
export function subjectOf(path: readonly PropertyKey[]): string {
  let subject = "";
  for (let i = path.length - 1; i >= 0; i--) {
    const segment = path[i];
    if (typeof segment === "number") {
      subject = `[${segment}]${subject}`;
      continue;
    }
    return `${String(segment)}${subject}`;
  }
  return subject === "" ? "the spec" : `the item ${subject}`;
}
