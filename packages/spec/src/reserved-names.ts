import type { IssuePathSegment } from "./issue-path.ts";

// A name (a throttler, class, stream or computation id) spelled `__proto__` cannot be an ordinary key
// of the JavaScript objects a parsed spec is made of: the schema library skips it, so it would
// vanish without a word. It is refused by name instead. `constructor` and `prototype` work like any
// other name (docs/design.md §5.3: ids are ordinary ids).

export const RESERVED_NAME = "__proto__";

/** The paths (from the document root) of every own `__proto__` key in `input`, found without recursion. */
export function reservedNamePaths(input: unknown): IssuePathSegment[][] {
  const found: IssuePathSegment[][] = [];
  const stack: { value: unknown; path: IssuePathSegment[] }[] = [{ value: input, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: IssuePathSegment[] };
    if (Array.isArray(value)) {
      value.forEach((item, index) => stack.push({ value: item, path: [...path, index] }));
    } else if (typeof value === "object" && value !== null) {
      for (const key of Object.keys(value)) {
        if (key === RESERVED_NAME) found.push([...path, key]);
        stack.push({ value: (value as Record<string, unknown>)[key], path: [...path, key] });
      }
    }
  }
  return found;
}

export function reservedNameMessage(): string {
  return `"${RESERVED_NAME}" cannot be used as a name (JavaScript objects reserve it); choose another name`;
}
