// The checks a reader of `<pipeline>.controller-state` applies to the JSON values of a record
// (controller-state-adaptive.ts, controller-state-leases.ts): a record is read, never trusted, so a
// value of the wrong type or out of range is left out instead of stopping a controller.

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function finite(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v);
}

export function positive(v: unknown): v is number {
  return finite(v) && v > 0;
}

/** A finite number ≥ 0 (a load, a use), else undefined. */
export function atLeastZero(v: unknown): number | undefined {
  return finite(v) && v >= 0 ? v : undefined;
}

/** A whole number ≥ 0 (a count of readings), else undefined: 0.5 readings cannot be one of ours. */
export function wholeAtLeastZero(v: unknown): number | undefined {
  return finite(v) && v >= 0 && Number.isInteger(v) ? v : undefined;
}
