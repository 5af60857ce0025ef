import type { SourceRecord } from "../ports/source.ts";
import { NO_RECORD_HEADERS } from "./source-record-reader.ts";

/**
 * Serialized size of a record as bytes throttlers meter it (docs/design.md §10): key + value + every header
 * name (UTF-8) and value, before compression. Offsets, timestamps and framing are not counted.
 */
export function recordByteSize(record: Pick<SourceRecord, "key" | "value" | "headers">): number {
  return byteSizeOf(record.key, record.value, record.headers);
}

/** recordByteSize of a record's fields, for a job reading them through a RecordReader. */
export function byteSizeOf(key: Uint8Array | null, value: Uint8Array | null, headers: Readonly<Record<string, Uint8Array>>): number {
  let size = (key?.byteLength ?? 0) + (value?.byteLength ?? 0);
  if (headers === NO_RECORD_HEADERS) return size;
  // for…in, not Object.keys: most records have no headers, and this runs for every record.
  for (const name in headers) if (Object.hasOwn(headers, name)) size += Buffer.byteLength(name, "utf8") + (headers[name]?.byteLength ?? 0);
  return size;
}
