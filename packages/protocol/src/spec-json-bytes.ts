import { isUtf8 } from "node:buffer";
import { SluiceError } from "@sluice/core";

// Proto3 strings must be UTF-8, but the decoder behind @grpc/proto-loader (protobufjs) turns any
// bytes into some string without a word, so a dynamic_spec_json with a stray byte would be judged
// as whatever characters the decoder made up. UpdateDynamicSpec checks the field's bytes first and
// refuses invalid UTF-8 with its position, as it refuses bad JSON.

/** Field number of dynamic_spec_json in UpdateDynamicSpecRequest (quota.proto). */
const DYNAMIC_SPEC_JSON_FIELD = 1;

/** SPEC_INVALID naming where dynamic_spec_json stops being UTF-8, or null when it is valid (or absent). */
export function specJsonEncodingProblem(message: Buffer): SluiceError | null {
  const bytes = lastLengthDelimitedField(message, DYNAMIC_SPEC_JSON_FIELD);
  if (bytes === undefined || isUtf8(bytes)) return null;
  const byteOffset = firstInvalidUtf8Offset(bytes);
  const lineStart = bytes.lastIndexOf(0x0a, byteOffset - 1) + 1;
  let line = 1;
  for (let i = bytes.indexOf(0x0a); i !== -1 && i < byteOffset; i = bytes.indexOf(0x0a, i + 1)) line++;
  // Columns count characters (UTF-16 code units), as the JSON error positions do.
  const column = bytes.subarray(lineStart, byteOffset).toString("utf8").length + 1;
  const byte = `0x${(bytes[byteOffset] ?? 0).toString(16).toUpperCase().padStart(2, "0")}`;
  return new SluiceError(
    "SPEC_INVALID",
    `dynamic_spec_json is not valid UTF-8 at line ${line}, column ${column} (byte ${byte} at byte offset ${byteOffset}); ` +
      "send the spec as UTF-8 text; the controller's dynamic_spec is unchanged",
    { line, column, byteOffset },
  );
}

/**
 * The bytes of the last occurrence of length-delimited field `fieldNumber` (proto3: the last one
 * wins), or undefined when it is absent or the message is malformed (see wireFormatProblem).
 */
export function lastLengthDelimitedField(message: Buffer, fieldNumber: number): Buffer | undefined {
  let found: Buffer | undefined;
  const problem = walkFields(message, (field, bytes) => {
    if (field === fieldNumber) found = bytes;
  });
  return problem === null ? found : undefined;
}

/**
 * What is wrong with `message` as protobuf wire format, or null when every field is complete. The
 * decoder behind proto-loader reads a length that runs past the end as whatever bytes are there.
 */
export function wireFormatProblem(message: Buffer): string | null {
  return walkFields(message, null);
}

/** `onLengthDelimited` null: only the walk (no view of each field's bytes is made). */
function walkFields(message: Buffer, onLengthDelimited: ((field: number, bytes: Buffer) => void) | null): string | null {
  let pos = 0;
  const varint = (): number | undefined => {
    let value = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      const byte = message[pos++];
      if (byte === undefined) return undefined;
      // Past 2^53 a length or tag is garbage anyway; the arithmetic stays exact up to there.
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    return undefined;
  };
  while (pos < message.length) {
    const at = pos;
    const tag = varint();
    if (tag === undefined) return `the field tag at byte ${at} is cut short`;
    const wireType = tag % 8;
    const field = Math.floor(tag / 8);
    if (field === 0) return `byte ${at} starts a field numbered 0`;
    if (wireType === 0) {
      if (varint() === undefined) return `the value of field ${field} at byte ${at} is cut short`;
    } else if (wireType === 1 || wireType === 5) {
      pos += wireType === 1 ? 8 : 4;
      if (pos > message.length) return `the value of field ${field} at byte ${at} is cut short`;
    } else if (wireType === 2) {
      const length = varint();
      if (length === undefined || pos + length > message.length) {
        return `field ${field} at byte ${at} declares ${length ?? "a cut-short"} bytes, more than the message holds`;
      }
      if (onLengthDelimited) onLengthDelimited(field, message.subarray(pos, pos + length));
      pos += length;
    } else return `field ${field} at byte ${at} has wire type ${wireType}, which no field of quota.proto uses`;
  }
  return null;
}

/** Byte offset of the first byte that does not belong to a well-formed UTF-8 sequence, or -1. */
export function firstInvalidUtf8Offset(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i] ?? 0;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    // Lead byte: sequence length and the allowed range of the second byte (no overlongs, no
    // surrogates, nothing above U+10FFFF), per the Unicode table of well-formed byte sequences.
    let length: number;
    let low = 0x80;
    let high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) length = 2;
    else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead === 0xe0) low = 0xa0;
      if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead === 0xf0) low = 0x90;
      if (lead === 0xf4) high = 0x8f;
    } else return i;
    for (let k = 1; k < length; k++) {
      const next = bytes[i + k];
      if (next === undefined) return i;
      if (k === 1 ? next < low || next > high : next < 0x80 || next > 0xbf) return i;
    }
    i += length;
  }
  return -1;
}
