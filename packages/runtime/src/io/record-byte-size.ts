import type { SourceRecord } from "../ports/source.ts";

/**
 * Serialized size of a record as bytes throttlers meter it (DESIGN §6): key + value + every header
 * name (UTF-8) and value, before compression. Offsets, timestamps and framing are not counted.
 */
export function recordByteSize(record: Pick<SourceRecord, "key" | "value" | "headers">): number {
  let size = (record.key?.byteLength ?? 0) + (record.value?.byteLength ?? 0);
  // for…in, not Object.keys: most records have no headers, and this runs for every record.
  for (const name in record.headers) if (Object.hasOwn(record.headers, name)) size += Buffer.byteLength(name, "utf8") + (record.headers[name]?.byteLength ?? 0);
  return size;
}
