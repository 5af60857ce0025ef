// Checks that span several fields run as zod refinements on the enclosing object. They must run even
// when fields inside that object failed their own schema — otherwise fixing one typo would only
// reveal the next error — so they read a partially parsed value: whatever failed is still the raw
// input there. They guard every read and skip what is not shaped as expected; the schema has already
// reported that.

/** Refinement option: run even when the object has issues inside. */
export const DESPITE_INNER_ISSUES = { when: () => true } as const;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
