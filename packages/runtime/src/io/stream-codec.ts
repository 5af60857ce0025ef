import type { StreamFormat } from "@sluice/spec";
import { SluiceError } from "@sluice/core";
import { NO_RECORD_HEADERS } from "./source-record-reader.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * UTF-8 text of a value. A Buffer (what kafkajs hands over) is decoded by Buffer's own toString,
 * which is cheaper than TextDecoder for the short values of a busy stream. The
 * result is the same, but for a leading byte order mark, which TextDecoder drops: such values go
 * through TextDecoder.
 */
function utf8(bytes: Uint8Array): string {
  // toString() without arguments: with an encoding argument Buffer looks the encoding up first.
  if (Buffer.isBuffer(bytes) && !(bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)) return bytes.toString();
  return decoder.decode(bytes);
}

/**
 * Turns stored bytes into the value user code sees, by the stream's format. `where` names the record
 * in an error; it may be a function so that the hot path builds no message for every record.
 */
export function decodeValue(format: StreamFormat, bytes: Uint8Array | null, where: string | (() => string)): unknown {
  if (bytes === null) return null;
  switch (format) {
    case "bytes":
      return bytes;
    case "string":
      return utf8(bytes);
    case "json": {
      const text = utf8(bytes);
      try {
        return JSON.parse(text);
      } catch (error) {
        throw new SluiceError(
          "SPEC_INVALID",
          `${typeof where === "function" ? where() : where}: the stream's format is "json" but the value is not JSON (${error instanceof Error ? error.message : String(error)}): ${text.slice(0, 80)}`,
        );
      }
    }
  }
}

/** Turns an emitted value into bytes, by the output stream's format. */
export function encodeValue(format: StreamFormat, value: unknown, where: string): Uint8Array | null {
  if (value === null || value === undefined) return null;
  switch (format) {
    case "bytes":
      if (value instanceof Uint8Array) return value;
      throw new SluiceError("SPEC_INVALID", `${where}: the stream's format is "bytes" but the value is a ${typeof value}; emit a Uint8Array`);
    case "string":
      return encoder.encode(typeof value === "string" ? value : String(value));
    case "json":
      return encoder.encode(JSON.stringify(value));
  }
}

export function decodeText(bytes: Uint8Array | null): string | null {
  return bytes === null ? null : utf8(bytes);
}

export function encodeText(text: string | null | undefined): Uint8Array | null {
  return text === null || text === undefined ? null : encoder.encode(text);
}

/** Most records have no headers; their messages share one frozen empty set instead of one object each. */
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export function decodeHeaders(headers: Readonly<Record<string, Uint8Array>>): Readonly<Record<string, string>> {
  if (headers === NO_RECORD_HEADERS) return NO_HEADERS;
  // for…in finds out that there are none without allocating Object.keys's array for every record.
  let out: Record<string, string> | null = null;
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue;
    const value = headers[name];
    out ??= {};
    if (value !== undefined) Object.defineProperty(out, name, { value: decoder.decode(value), enumerable: true, writable: true, configurable: true });
  }
  return out ?? NO_HEADERS;
}

export function encodeHeaders(headers: Readonly<Record<string, string>> | undefined): Record<string, Uint8Array> | undefined {
  if (!headers) return undefined;
  // Object.fromEntries makes own properties: a header named "__proto__" is kept like any other.
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, encoder.encode(value)]));
}
