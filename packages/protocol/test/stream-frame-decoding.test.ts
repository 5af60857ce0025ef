import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadSync } from "@grpc/proto-loader";
import type { MethodDefinition } from "@grpc/grpc-js";
import { QUOTA_PROTO_PATH, QUOTA_SERVICE_NAME, quotaServiceDefinition, type WireQuotaStreamClientFrame } from "../src/proto-definition.ts";
import { decodeRequestFrame } from "../src/stream-frame-decoding.ts";

// The QuotaStream server decodes frames of RequestQuota and cancel calls with its own decoder
// (stream-frame-decoding.ts); what it makes of any bytes must be what proto-loader's general decoder
// makes of them (the same objects, defaults and numbers), or the general decoder must be used.

const general = (() => {
  const definitions = loadSync(QUOTA_PROTO_PATH, { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true });
  const service = definitions[QUOTA_SERVICE_NAME] as unknown as { QuotaStream: MethodDefinition<WireQuotaStreamClientFrame, unknown> };
  return service.QuotaStream.requestDeserialize;
})();
const method = quotaServiceDefinition().QuotaStream;
const encode = (frame: WireQuotaStreamClientFrame): Buffer => method.requestSerialize(frame);

/** A small deterministic generator (xorshift), so a failure names a seed that reproduces it. */
function random(seed: number) {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  return { next, pick };
}

const STRINGS = ["", "api", "key-42", "é€😀", "~0", "a".repeat(300), "worker/k0", "0f8fad5b-d9cb-469f-a165-70867728950e"];
const NUMBERS = [0, 1, 127, 128, 16_383, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 1_700_000_000_000, 2 ** 53 - 1];
const AMOUNTS = [0, 1, 0.5, 3.25, 1e9, Number.MAX_SAFE_INTEGER];

function randomFrame(seed: number, kinds: readonly string[]): WireQuotaStreamClientFrame {
  const { next, pick } = random(seed);
  const calls = Array.from({ length: 1 + Math.floor(next() * 20) }, () => {
    const metadata: Record<string, string> = {};
    for (let i = Math.floor(next() * 3); i > 0; i--) metadata[pick(["traceparent", "tracestate", "x-é"])] = pick(STRINGS);
    const base = { callId: pick(NUMBERS), timeoutMs: pick(NUMBERS), metadata };
    const kind = pick(kinds);
    if (kind === "cancel") return { ...base, cancel: {} };
    if (kind === "releaseQuota") return { ...base, releaseQuota: { throttlerId: pick(STRINGS), clientId: pick(STRINGS), amount: 1, quotaClassId: "" } };
    const key = next() < 0.5 ? { key: pick(STRINGS) } : {};
    return {
      ...base,
      requestQuota: {
        throttlerId: pick(STRINGS),
        clientId: pick(STRINGS),
        amount: pick(AMOUNTS),
        timestampMs: pick(NUMBERS),
        quotaClassId: pick(STRINGS),
        requestId: pick(STRINGS),
        ...key,
      },
    };
  });
  return { calls };
}

describe("QuotaStream frames of RequestQuota calls, decoded without protobufjs instances", () => {
  it("decodes RequestQuota and cancel calls to exactly what the general decoder makes of them", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const bytes = encode(randomFrame(seed, ["requestQuota", "requestQuota", "cancel"]));
      const fast = decodeRequestFrame(bytes);
      assert.ok(fast, `seed ${seed}: the fast decoder takes the frame`);
      assert.deepEqual(fast, general(bytes), `seed ${seed}`);
      assert.deepEqual(method.requestDeserialize(bytes), general(bytes), `seed ${seed}: the server's decoder`);
    }
  });

  it("reads a repeated throttler or client id as the same text, and a changed one of the same length as itself", () => {
    const call = (callId: number, throttlerId: string, clientId: string) => ({
      callId,
      timeoutMs: 0,
      metadata: {},
      requestQuota: { throttlerId, clientId, amount: 1, timestampMs: 0, quotaClassId: "", requestId: `r${callId}`, key: "k" },
    });
    const first = encode({ calls: [call(1, "api-1", "w/1"), call(2, "api-1", "w/1")] });
    assert.deepEqual(decodeRequestFrame(first), general(first));
    // The transport may reuse a frame's buffer: what was read from it must not change with it.
    const second = encode({ calls: [call(3, "api-2", "w/2"), call(4, "api-1", "w/1")] });
    first.fill(0);
    assert.deepEqual(decodeRequestFrame(second), general(second));
    const ids = (decodeRequestFrame(second)?.calls ?? []).map((c) => [c.requestQuota?.throttlerId, c.requestQuota?.clientId]);
    assert.deepEqual(ids, [
      ["api-2", "w/2"],
      ["api-1", "w/1"],
    ]);
  });

  it("leaves frames with other calls, or two members of the oneof, to the general decoder", () => {
    for (let seed = 1; seed <= 50; seed++) {
      const bytes = encode(randomFrame(seed, ["requestQuota", "releaseQuota"]));
      const hasRelease = (general(bytes) as WireQuotaStreamClientFrame).calls.some((call) => call.releaseQuota);
      if (hasRelease) assert.equal(decodeRequestFrame(bytes), null, `seed ${seed}`);
      assert.deepEqual(method.requestDeserialize(bytes), general(bytes), `seed ${seed}: the server's decoder`);
    }
    // A call carrying both request_quota and cancel: protobufjs keeps both, so the general decoder decides.
    const request = encode({
      calls: [
        {
          callId: 1,
          timeoutMs: 0,
          metadata: {},
          requestQuota: { throttlerId: "a", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: "r" },
        },
      ],
    });
    const cancel = encode({ calls: [{ callId: 1, timeoutMs: 0, metadata: {}, cancel: {} }] });
    // Both frames' single call field (tag 0x0a, length, body): join the two bodies into one call.
    const body = (frame: Buffer) => frame.subarray(2);
    const joined = Buffer.concat([Buffer.from([0x0a, body(request).length + body(cancel).length - 2]), body(request), body(cancel).subarray(2)]);
    assert.equal(decodeRequestFrame(joined), null);
    assert.deepEqual(method.requestDeserialize(joined), general(joined));
  });

  it("refuses what the general decoder refuses: truncated frames throw the same way through the server's decoder", () => {
    for (let seed = 1; seed <= 100; seed++) {
      const bytes = encode(randomFrame(seed, ["requestQuota", "cancel"]));
      const cut = bytes.subarray(0, Math.max(1, Math.floor(bytes.length * random(seed).next())));
      let expected: unknown;
      let expectedError: unknown;
      try {
        expected = general(cut);
      } catch (error) {
        expectedError = error;
      }
      if (expectedError) assert.throws(() => method.requestDeserialize(cut), `seed ${seed}`);
      else assert.deepEqual(method.requestDeserialize(cut), expected, `seed ${seed}`);
    }
  });
});
