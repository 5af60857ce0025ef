import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadSync } from "@grpc/proto-loader";
import type { MethodDefinition } from "@grpc/grpc-js";
import { encodeGrantFrame } from "../src/stream-answer-encoding.ts";
import {
  QUOTA_PROTO_PATH,
  QUOTA_SERVICE_NAME,
  quotaServiceDefinition,
  type WireQuotaStreamClientFrame,
  type WireQuotaStreamServerFrame,
} from "../src/proto-definition.ts";

// QuotaStream's frames are encoded straight from plain objects (proto-definition.ts); the bytes must
// be those proto-loader's own serializer (fromObject, then encode) writes, for every kind of call
// and answer, so nothing on the wire changes.

const serverFrame: WireQuotaStreamServerFrame = {
  answers: [
    { callId: 1, requestQuota: { granted: 5, waitedMs: 12, paceStartDelayMs: 0, paceIntervalMs: 0 } },
    { callId: 2 ** 40, releaseQuota: {} },
    { callId: 3, renewLeases: { held: 0 } },
    { callId: 4, dynamicSpecUpdate: { version: 7, dynamicSpecJson: '{"a":"é"}' } },
    { callId: 5, error: { grpcStatus: 5, message: "NOT_FOUND: x", sluiceErrorCode: "THROTTLER_REMOVED", detailsJson: "", leader: "h:1" } },
    { callId: 6, requestQuota: { granted: 0, waitedMs: 0, paceStartDelayMs: 1.5, paceIntervalMs: 2.25 } },
  ],
};
const clientFrame: WireQuotaStreamClientFrame = {
  calls: [
    {
      callId: 1,
      timeoutMs: 100,
      metadata: { traceparent: "00-ab" },
      requestQuota: { throttlerId: "api", clientId: "c", amount: 3, timestampMs: 1_700_000_000_000, quotaClassId: "gold", requestId: "r" },
    },
    { callId: 2, timeoutMs: 0, metadata: {}, releaseQuota: { throttlerId: "api", clientId: "c", amount: 1, quotaClassId: "" } },
    { callId: 3, timeoutMs: 0, metadata: {}, renewLeases: { clientId: "c", throttlerIds: ["a", "b"] } },
    { callId: 4, timeoutMs: 0, metadata: {}, watchDynamicSpec: { clientId: "c" } },
    { callId: 5, timeoutMs: 0, metadata: {}, cancel: {} },
  ],
};

describe("QuotaStream frame encoding", () => {
  const definitions = loadSync(QUOTA_PROTO_PATH, { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true });
  const protoLoader = (definitions[QUOTA_SERVICE_NAME] as unknown as Record<string, MethodDefinition<object, object>>)["QuotaStream"];
  const direct = quotaServiceDefinition().QuotaStream;

  it("writes the bytes proto-loader writes, for every call and answer kind", () => {
    assert.ok(protoLoader);
    assert.deepEqual(direct.responseSerialize(serverFrame), protoLoader.responseSerialize(serverFrame));
    assert.deepEqual(direct.requestSerialize(clientFrame), protoLoader.requestSerialize(clientFrame));
  });

  it("writes a frame of grants itself, byte for byte as proto-loader, and leaves any other frame to protobufjs", () => {
    assert.ok(protoLoader);
    const grant = (callId: number, granted: number, waitedMs: number, pace: [number, number, number] = [0, 0, 0]) => ({
      callId,
      requestQuota: { granted, waitedMs, paceStartDelayMs: pace[0], paceIntervalMs: pace[1], paceAnsweredAtMs: pace[2] },
    });
    const grants: WireQuotaStreamServerFrame = {
      answers: [
        grant(1, 1, 0),
        grant(127, 0.25, 127),
        grant(128, 1e9, 128, [-3.5, 104.2, 1_700_000_000_123.5]),
        grant(2 ** 32 + 5, -0, 2 ** 32 + 1),
        grant(Number.MAX_SAFE_INTEGER, Number.NaN, Number.MAX_SAFE_INTEGER, [Infinity, -Infinity, 0]),
        ...Array.from({ length: 300 }, (_, i) => grant(1_000 + i, 1 + (i % 7), i * 37)),
      ],
    };
    const written = encodeGrantFrame(grants);
    assert.ok(written, "a frame of plain grants is written directly");
    assert.deepEqual(written, protoLoader.responseSerialize(grants));
    assert.deepEqual(direct.responseSerialize(grants), written);
    assert.deepEqual(encodeGrantFrame({ answers: [] }), protoLoader.responseSerialize({ answers: [] }));
    const decoded = direct.responseDeserialize(written).answers;
    assert.equal(decoded[4]?.callId, Number.MAX_SAFE_INTEGER);
    assert.equal(decoded[2]?.requestQuota?.paceAnsweredAtMs, 1_700_000_000_123.5);
    // Anything else goes the general way (and still writes proto-loader's bytes).
    const others: WireQuotaStreamServerFrame[] = [
      { answers: [grant(1, 1, 0), { callId: 2, releaseQuota: {} }] },
      { answers: [{ callId: 1, requestQuota: { granted: 5, waitedMs: 12, paceStartDelayMs: 0, paceIntervalMs: 0 } }] },
      { answers: [grant(1, 1, 0.5)] },
      { answers: [{ ...grant(1, 1, 0), error: { grpcStatus: 5, message: "m", sluiceErrorCode: "", detailsJson: "", leader: "" } }] },
    ];
    for (const frame of others) {
      assert.equal(encodeGrantFrame(frame), null, JSON.stringify(frame));
      assert.deepEqual(direct.responseSerialize(frame), protoLoader.responseSerialize(frame));
    }
    assert.equal(encodeGrantFrame({ answers: [grant(-1, 1, 0)] }), null, "a negative call id (never answered) is not a varint here");
  });

  it("reads back what it wrote", () => {
    const answers = direct.responseDeserialize(direct.responseSerialize(serverFrame)).answers;
    assert.deepEqual(
      answers.map((answer) => [answer.callId, answer.answer]),
      [
        [1, "requestQuota"],
        [2 ** 40, "releaseQuota"],
        [3, "renewLeases"],
        [4, "dynamicSpecUpdate"],
        [5, "error"],
        [6, "requestQuota"],
      ],
    );
    assert.equal(answers[3]?.dynamicSpecUpdate?.dynamicSpecJson, '{"a":"é"}');
    assert.equal(answers[5]?.requestQuota?.paceIntervalMs, 2.25);
    const calls = direct.requestDeserialize(direct.requestSerialize(clientFrame)).calls;
    assert.deepEqual(
      calls.map((call) => call.call),
      ["requestQuota", "releaseQuota", "renewLeases", "watchDynamicSpec", "cancel"],
    );
    assert.equal(calls[0]?.metadata["traceparent"], "00-ab");
  });
});
