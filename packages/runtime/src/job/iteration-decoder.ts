import type { StreamFormat } from "@sluice/spec";
import type { Message } from "../computation.ts";
import { byteSizeOf } from "../io/record-byte-size.ts";
import { decodeHeaders, decodeText, decodeValue } from "../io/stream-codec.ts";
import type { RecordReader } from "../ports/source.ts";

/**
 * Turns one iteration's records, in whatever form their source keeps them, into the messages the
 * computation sees (docs/design.md §10) and their byte total, in one loop: each record's fields are read
 * once through its reader and become one Message.
 */
export class IterationDecoder {
  /** The offset of the record being decoded, for `where`. */
  private decodingOffset = "";
  /**
   * Names a record whose value does not decode. One closure per job, reading the record being
   * decoded: a closure per record showed in the garbage of a busy Kafka job, and under tsx a named
   * closure made per call costs an `Object.defineProperty` (esbuild's keepNames) besides.
   */
  private readonly where = (): string => `stream "${this.stream}" partition ${this.partition} offset ${this.decodingOffset}`;

  constructor(
    private readonly stream: string,
    private readonly partition: number,
    private readonly format: StreamFormat,
  ) {}

  decode<R>(records: readonly R[], reader: RecordReader<R>): { messages: Message[]; bytes: number } {
    const { stream, partition, format } = this;
    const messages: Message[] = [];
    let bytes = 0;
    for (const record of records) {
      const offset = reader.offset(record);
      this.decodingOffset = offset;
      const key = reader.key(record);
      const value = reader.value(record);
      const headers = reader.headers(record);
      const byteSize = byteSizeOf(key, value, headers);
      bytes += byteSize;
      messages.push({
        stream,
        key: decodeText(key),
        value: decodeValue(format, value, this.where),
        headers: decodeHeaders(headers),
        partition,
        offset,
        timestampMs: reader.timestampMs(record),
        byteSize,
      });
    }
    return { messages, bytes };
  }
}
