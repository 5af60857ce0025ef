import type { SourceRecord } from "../ports/source.ts";

const encoder = new TextEncoder();

/**
 * Serialized size of a record as bytes throttlers meter it (DESIGN §6): key + value + every header
 * name (UTF-8) and value, before compression. Offsets, timestamps and framing are not counted.
 */
export function recordByteSize(record: Pick<SourceRecord, "key" | "value" | "headers">): number {
  let size = (record.key?.byteLength ?? 0) + (record.value?.byteLength ?? 0);
  for (const [name, value] of Object.entries(record.headers)) size += encoder.encode(name).byteLength + value.byteLength;
  return size;
}
