import { isUtf8 } from "node:buffer";
import { SluiceError } from "@sluice/core";
import type { QuotaServiceDefinition, WireUpdateDynamicSpecRequest } from "./proto-definition.ts";

// Proto3 strings must be UTF-8, but the decoder behind @grpc/proto-loader (protobufjs) turns any
// bytes into some string without a word, so a dynamic_spec_json with a stray byte would be judged
// as whatever characters the decoder made up. UpdateDynamicSpec checks the field's bytes first and
// refuses invalid UTF-8 with its position, as it refuses bad JSON.

/** Field number of dynamic_spec_json in UpdateDynamicSpecRequest (quota.proto). */
const DYNAMIC_SPEC_JSON_FIELD = 1;

/** An UpdateDynamicSpecRequest as the server decodes it: the fields, and what is wrong with their bytes. */
export interface CheckedUpdateDynamicSpecRequest extends WireUpdateDynamicSpecRequest {
  readonly encodingProblem: SluiceError | null;
}

/** The service definition with an UpdateDynamicSpec decoder that also checks dynamic_spec_json's bytes. */
export function checkingSpecJsonEncoding(definition: QuotaServiceDefinition) {
  const method = definition.UpdateDynamicSpec;
  return {
    ...definition,
    UpdateDynamicSpec: {
      ...method,
      requestDeserialize: (bytes: Buffer): CheckedUpdateDynamicSpecRequest => ({
        ...method.requestDeserialize(bytes),
        encodingProblem: specJsonEncodingProblem(bytes),
      }),
    },
  };
}

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
 * wins), or undefined when it is absent or the message is cut short (the decoder reports that).
 */
export function lastLengthDelimitedField(message: Buffer, fieldNumber: number): Buffer | undefined {
  let pos = 0;
  let found: Buffer | undefined;
  const varint = (): number | undefined => {
    let value = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      const byte = message[pos++];
      if (byte === undefined) return undefined;
      // Past 2^53 a length or tag is garbage anyway; the arithmetic stays in safe integers up to there.
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    return undefined;
  };
  while (pos < message.length) {
    const tag = varint();
    if (tag === undefined) return found;
    const wireType = tag % 8;
    const field = Math.floor(tag / 8);
    if (wireType === 0) {
      if (varint() === undefined) return found;
    } else if (wireType === 1) pos += 8;
    else if (wireType === 5) pos += 4;
    else if (wireType === 2) {
      const length = varint();
      if (length === undefined || pos + length > message.length) return found;
      if (field === fieldNumber) found = message.subarray(pos, pos + length);
      pos += length;
    } else return found; // groups (3, 4) are not in this proto; stop rather than guess
  }
  return found;
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
