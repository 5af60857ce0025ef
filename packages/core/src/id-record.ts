// Maps keyed by ids that come from clients or specs (client ids, request ids, throttler and class
// ids, keys) treat `__proto__`, `constructor` and `prototype` as ordinary ids (docs/design.md §5.3). Reading
// `record[id]` on a plain object returns Object's own members for ids such as `constructor`; and
// writing `record["__proto__"] = x` replaces the prototype instead of storing x, so such records are
// built with Object.fromEntries (own properties) or kept in a Map.

/** `record[id]` when `id` is the record's own key, else undefined (never an inherited member such as `constructor`). */
export function ownEntry<T>(record: Readonly<Record<string, T>> | undefined, id: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, id) ? record[id] : undefined;
}
