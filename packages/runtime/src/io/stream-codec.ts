import type { StreamFormat } from "@sluice/spec";
import { SluiceError } from "@sluice/core";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

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
      return decoder.decode(bytes);
    case "json": {
      const text = decoder.decode(bytes);
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
  return bytes === null ? null : decoder.decode(bytes);
}

export function encodeText(text: string | null | undefined): Uint8Array | null {
  return text === null || text === undefined ? null : encoder.encode(text);
}

/** Most records have no headers; their messages share one frozen empty set instead of one object each. */
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export function decodeHeaders(headers: Readonly<Record<string, Uint8Array>>): Readonly<Record<string, string>> {
  const names = Object.keys(headers);
  if (names.length === 0) return NO_HEADERS;
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = headers[name];
    if (value !== undefined) Object.defineProperty(out, name, { value: decoder.decode(value), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

export function encodeHeaders(headers: Readonly<Record<string, string>> | undefined): Record<string, Uint8Array> | undefined {
  if (!headers) return undefined;
  const out: Record<string, Uint8Array> = {};
  for (const [name, value] of Object.entries(headers)) out[name] = encoder.encode(value);
  return out;
}
