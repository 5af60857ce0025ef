import type { IHeaders } from "kafkajs";
import { NO_RECORD_HEADERS } from "@sluice/runtime";

const encoder = new TextEncoder();
/** Most records have no headers; they share the runtime's one frozen empty set (the job skips it). */
const NO_HEADERS = NO_RECORD_HEADERS;

/**
 * kafkajs hands headers over as Buffer, string or arrays of them (a header name may repeat in
 * Kafka). The runtime's records carry one Uint8Array per name: the first value wins, strings are
 * encoded as UTF-8, absent values are dropped.
 */
export function fromKafkaHeaders(headers: IHeaders | undefined): Readonly<Record<string, Uint8Array>> {
  if (headers === undefined) return NO_HEADERS;
  // for…in, not Object.keys: kafkajs gives every record a headers object, nearly always empty, and
  // an array per record for finding that out showed in a busy consumer's profile.
  let result: Record<string, Uint8Array> | null = null;
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue;
    const raw = headers[name];
    const first = Array.isArray(raw) ? raw[0] : raw;
    result ??= {};
    if (first === undefined) continue;
    define(result, name, typeof first === "string" ? encoder.encode(first) : first);
  }
  return result ?? NO_HEADERS;
}

/** Runtime headers as kafkajs message headers, without copying the bytes. */
export function toKafkaHeaders(headers: Readonly<Record<string, Uint8Array>>): Record<string, Buffer> {
  const result: Record<string, Buffer> = {};
  for (const [name, value] of Object.entries(headers)) define(result, name, asBuffer(value));
  return result;
}

export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

// A header may be called "__proto__"; plain assignment would set the prototype instead.
function define<T>(target: Record<string, T>, name: string, value: T): void {
  Object.defineProperty(target, name, { value, enumerable: true, writable: true, configurable: true });
}
