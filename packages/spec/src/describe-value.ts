// How a bad value appears in an issue message ("got -1", "got \"5 sec\"", "got an array"): short
// enough for one line, precise enough to find the value in the file.

const MAX_STRING_LENGTH = 60;

export function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (typeof value === "string") {
    const shown = value.length > MAX_STRING_LENGTH ? `${value.slice(0, MAX_STRING_LENGTH)}…` : value;
    return JSON.stringify(shown);
  }
  if (typeof value === "number") return Object.is(value, -0) ? "0" : String(value);
  if (typeof value === "boolean") return String(value);
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "function") return "a function";
  if (typeof value === "symbol") return "a symbol";
  if (Array.isArray(value)) return value.length === 0 ? "an empty array" : "an array";
  return "an object";
}

/** `"a", "b", "c"`, for lists of declared names in messages. */
export function quoteList(names: Iterable<string>): string {
  return [...names].map((name) => JSON.stringify(name)).join(", ");
}
