import protobuf from "protobufjs";
import type { WireQuotaStreamCall, WireQuotaStreamClientFrame, WireRequestQuotaRequest } from "./proto-definition.ts";

// The controller's busiest input, a QuotaStreamClientFrame of RequestQuota (and cancel) calls,
// decoded straight from its bytes into the plain objects proto-loader makes of it (the same fields,
// defaults and numbers), without protobufjs's message instances and their copy by `toObject`: a
// worker with many keys sends hundreds of calls per frame (docs/design.md §11.4). Anything else — another
// kind of call, two members of the `call` oneof, a known field with an unexpected wire type, a
// metadata key that is not a plain property — returns null, and the frame is decoded the general way.

const { Reader } = protobuf;
type ProtoReader = protobuf.Reader;

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const TWO_TO_32 = 4294967296;
const NO_METADATA: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** The frame as proto-loader decodes it (longs: Number, defaults, oneofs), or null to decode it the general way. Throws on malformed bytes. */
export function decodeRequestFrame(bytes: Uint8Array): WireQuotaStreamClientFrame | null {
  const reader = Reader.create(bytes);
  const calls: WireQuotaStreamCall[] = [];
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1) {
      if ((tag & 7) !== WIRE_BYTES) return null;
      const call = decodeCall(reader, endOf(reader));
      if (call === null) return null;
      calls.push(call);
    } else {
      reader.skipType(tag & 7);
    }
  }
  return { calls };
}

function decodeCall(reader: ProtoReader, end: number): WireQuotaStreamCall | null {
  let callId = 0;
  let timeoutMs = 0;
  // Most calls carry no metadata: they share one frozen empty record (the server only reads it).
  let metadata = NO_METADATA;
  let requestQuota: WireRequestQuotaRequest | null | undefined = null;
  let cancel = false;
  while (reader.pos < end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === WIRE_VARINT) callId = uint64(reader);
    else if (field === 2 && wire === WIRE_VARINT) timeoutMs = uint64(reader);
    else if (field === 3 && wire === WIRE_BYTES) {
      if (metadata === NO_METADATA) metadata = {};
      if (!readMetadataEntry(reader, endOf(reader), metadata)) return null;
    } else if (field === 4 && wire === WIRE_BYTES && requestQuota === null && !cancel) requestQuota = decodeRequestQuota(reader, endOf(reader));
    else if (field === 8 && wire === WIRE_BYTES && requestQuota === null && !cancel) {
      reader.skip(reader.uint32()); // QuotaStreamCancel has no fields
      cancel = true;
    } else if (field <= 8) return null;
    else reader.skipType(wire);
    if (requestQuota === undefined) return null;
  }
  if (reader.pos !== end) throw new Error(`a QuotaStreamCall runs past its length (${reader.pos} > ${end})`);
  if (requestQuota) return { metadata, callId, timeoutMs, requestQuota, call: "requestQuota" };
  if (cancel) return { metadata, callId, timeoutMs, cancel: {}, call: "cancel" };
  return null;
}

/** A RequestQuotaRequest, every field present (proto-loader's defaults); undefined to decode the frame the general way. */
function decodeRequestQuota(reader: ProtoReader, end: number): WireRequestQuotaRequest | undefined {
  let throttlerId = "";
  let clientId = "";
  let amount = 0;
  let timestampMs = 0;
  let quotaClassId = "";
  let requestId = "";
  let key = "";
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag) {
      case (1 << 3) | WIRE_BYTES:
        throttlerId = THROTTLER_IDS.read(reader);
        break;
      case (2 << 3) | WIRE_BYTES:
        clientId = CLIENT_IDS.read(reader);
        break;
      case (3 << 3) | WIRE_FIXED64:
        amount = reader.double();
        break;
      case (4 << 3) | WIRE_VARINT:
        timestampMs = uint64(reader);
        break;
      case (5 << 3) | WIRE_BYTES:
        quotaClassId = reader.string();
        break;
      case (6 << 3) | WIRE_BYTES:
        requestId = reader.string();
        break;
      case (7 << 3) | WIRE_BYTES:
        key = reader.string();
        break;
      default:
        if (tag >>> 3 <= 7) return undefined;
        reader.skipType(tag & 7);
    }
  }
  if (reader.pos !== end) throw new Error(`a RequestQuotaRequest runs past its length (${reader.pos} > ${end})`);
  return { throttlerId, clientId, amount, timestampMs, quotaClassId, requestId, key };
}

/**
 * The last string read for one field, with its bytes: a worker's calls repeat their throttler id
 * and client id call after call, and the same bytes make the same string without a new one.
 */
class RepeatedString {
  private bytes: Uint8Array = new Uint8Array(0);
  private text = "";

  read(reader: ProtoReader): string {
    const at = reader.pos;
    const length = reader.uint32();
    const start = reader.pos;
    const end = start + length;
    if (end > reader.len) throw new RangeError(`index out of range: ${start} + ${length} > ${reader.len}`);
    const buf = reader.buf;
    if (length === this.bytes.length && length <= MAX_REPEATED_BYTES) {
      let same = true;
      for (let i = 0; i < length; i++) {
        if (buf[start + i] !== this.bytes[i]) {
          same = false;
          break;
        }
      }
      if (same) {
        reader.pos = end;
        return this.text;
      }
    }
    // Read as protobufjs reads any string (the same decoding of any bytes); then kept with a copy of
    // its bytes (never a view: the frame's buffer is the transport's).
    reader.pos = at;
    const text = reader.string();
    if (length <= MAX_REPEATED_BYTES) {
      const copy = new Uint8Array(length);
      copy.set(buf.subarray(start, end));
      this.bytes = copy;
      this.text = text;
    }
    return text;
  }
}

/** Ids longer than this are read as they come (an id is at most 1,024 characters; most are short). */
const MAX_REPEATED_BYTES = 128;
const THROTTLER_IDS = new RepeatedString();
const CLIENT_IDS = new RepeatedString();

/** One `map<string, string>` entry into `into`; false when it is not a plain entry to set. */
function readMetadataEntry(reader: ProtoReader, end: number, into: Record<string, string>): boolean {
  let key = "";
  let value = "";
  while (reader.pos < end) {
    const tag = reader.uint32();
    if (tag === ((1 << 3) | WIRE_BYTES)) key = reader.string();
    else if (tag === ((2 << 3) | WIRE_BYTES)) value = reader.string();
    else return false;
  }
  if (reader.pos !== end) throw new Error(`a metadata entry runs past its length (${reader.pos} > ${end})`);
  if (key === "__proto__") return false;
  into[key] = value;
  return true;
}

/** The end of a length-delimited field starting at the reader's position; throws past the bytes. */
function endOf(reader: ProtoReader): number {
  const end = reader.uint32() + reader.pos;
  if (end > reader.len) throw new Error(`a field's length runs past the message (${end} > ${reader.len})`);
  return end;
}

/**
 * An unsigned 64-bit varint as a number, as proto-loader's `longs: Number` gives it (high × 2^32 +
 * low, exact below 2^53), read as protobufjs reads it, without a Long per field.
 */
function uint64(reader: ProtoReader): number {
  const buf = reader.buf;
  let lo = 0;
  let hi = 0;
  let pos = reader.pos;
  for (let i = 0; i < 4; i++) {
    const byte = byteAt(buf, pos++, reader.len);
    lo = (lo | ((byte & 127) << (i * 7))) >>> 0;
    if (byte < 128) {
      reader.pos = pos;
      return lo;
    }
  }
  let byte = byteAt(buf, pos++, reader.len);
  lo = (lo | ((byte & 127) << 28)) >>> 0;
  hi = (hi | ((byte & 127) >> 4)) >>> 0;
  if (byte < 128) {
    reader.pos = pos;
    return hi * TWO_TO_32 + lo;
  }
  for (let i = 0; i < 5; i++) {
    byte = byteAt(buf, pos++, reader.len);
    hi = (hi | ((byte & 127) << (i * 7 + 3))) >>> 0;
    if (byte < 128) {
      reader.pos = pos;
      return hi * TWO_TO_32 + lo;
    }
  }
  throw new Error("invalid varint encoding");
}

function byteAt(buf: Uint8Array, pos: number, len: number): number {
  if (pos >= len) throw new RangeError(`index out of range: ${pos} + 1 > ${len}`);
  return buf[pos] as number;
}
