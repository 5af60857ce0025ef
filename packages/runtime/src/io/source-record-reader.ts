import type { NativeRecords, RecordReader, SourceBatch, SourceRecord } from "../ports/source.ts";

/**
 * The headers of a record that has none. Sources give every such record this one frozen set, so
 * that the job knows without looking inside (a for…in per record, three times over, showed in a
 * busy consumer's profile) that there is nothing to size or decode.
 */
export const NO_RECORD_HEADERS: Readonly<Record<string, Uint8Array>> = Object.freeze({});

/** Reads SourceRecords themselves: what a batch without `native` records is read through. */
export const SOURCE_RECORD_READER: RecordReader<SourceRecord> = Object.freeze({
  key: (record: SourceRecord) => record.key,
  value: (record: SourceRecord) => record.value,
  headers: (record: SourceRecord) => record.headers,
  offset: (record: SourceRecord) => record.offset,
  timestampMs: (record: SourceRecord) => record.timestampMs,
});

/** A batch's records as the job reads them: the source's own form if it gave one, else its SourceRecords. */
export function nativeRecordsOf(batch: SourceBatch): NativeRecords {
  return batch.native ?? { items: batch.records, reader: SOURCE_RECORD_READER };
}
