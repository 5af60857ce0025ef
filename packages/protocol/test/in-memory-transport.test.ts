import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError, isSluiceError } from "@sluice/core";
import { createInMemoryQuotaClient, wireCopy, type DynamicSpecUpdate } from "../src/index.ts";
import { StubHandler, quota, untilAborted } from "./stub-handler.ts";

describe("in-memory transport", () => {
  it("rejects with QUOTA_TIMEOUT at the call's deadline and aborts the handler's signal", async () => {
    const clock = new ManualClock(1_000);
    const handler = new StubHandler();
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      throw new Error("not reached by the caller: the transport answered already");
    };
    const client = createInMemoryQuotaClient(handler, { clock });
    const call = client.requestQuota(quota(), { deadlineAt: 1_500 });
    const outcome = assert.rejects(call, (error: unknown) => {
      assert.ok(isSluiceError(error, "QUOTA_TIMEOUT"), String(error));
      assert.match(error.message, /passed its deadline 1970-01-01T00:00:01\.500Z \(the caller's own deadline\)/);
      return true;
    });
    await clock.advance(499);
    const context = handler.requests[0]?.context;
    assert.equal(context?.deadlineAt, 1_500, "the handler sees the caller's deadline");
    assert.equal(context?.signal.aborted, false);
    await clock.advance(1);
    await outcome;
    assert.equal(context?.signal.aborted, true);
  });

  it("turns the caller's abort into CANCELLED and aborts the handler's signal", async () => {
    const handler = new StubHandler();
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      return { granted: 1, waitedMs: 0 };
    };
    const client = createInMemoryQuotaClient(handler);
    const abort = new AbortController();
    const call = client.requestQuota(quota(), { signal: abort.signal });
    await new Promise((resolve) => setImmediate(resolve));
    abort.abort(new Error("job stopping"));
    await assert.rejects(call, (error: unknown) => isSluiceError(error, "CANCELLED") && /job stopping/.test(error.message));
    assert.equal(handler.requests[0]?.context.signal.aborted, true);
    await assert.rejects(client.requestQuota(quota(), { signal: abort.signal }), /CANCELLED/, "already aborted: not sent");
    assert.equal(handler.requests.length, 1);
  });

  it("carries a smooth throttler's schedule (pace fields) and leaves them out of unpaced answers", async () => {
    const handler = new StubHandler();
    const client = createInMemoryQuotaClient(handler);
    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 4, paceStartDelayMs: 12.5, paceIntervalMs: 104.16666666666667 });
    assert.deepEqual(await client.requestQuota(quota({ amount: 3 })), { granted: 3, waitedMs: 4, paceStartDelayMs: 12.5, paceIntervalMs: 104.16666666666667 });
    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 0 });
    assert.deepEqual(await client.requestQuota(quota({ amount: 3 })), { granted: 3, waitedMs: 0 });
  });

  it("copies requests and responses through JSON, keeping NaN and Infinity as a proto double would", async () => {
    const handler = new StubHandler();
    const response = { granted: 3, waitedMs: 12.7 };
    handler.onRequest = async (call) => {
      (call as { amount: number }).amount = 99; // a handler scribbling on its input
      return response;
    };
    const client = createInMemoryQuotaClient(handler);
    const request = { ...quota({ amount: 3, timestampMs: 17.9 }), extra: "not in the proto" };
    const result = await client.requestQuota(request, { metadata: { traceparent: "00-abc-def-01" } });
    assert.equal(request.amount, 3, "the caller's object is untouched");
    assert.notEqual(result, response, "the response is a copy");
    assert.deepEqual(result, { granted: 3, waitedMs: 12 }, "uint64 waited_ms is whole");
    const seen = handler.requests[0];
    assert.ok(seen && !("extra" in seen.call), "only the proto's fields cross");
    assert.equal(seen?.call.timestampMs, 17, "uint64 timestamp_ms is whole");
    assert.deepEqual(seen?.context.metadata, { traceparent: "00-abc-def-01" });

    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 0 });
    for (const amount of [NaN, Infinity, -Infinity, 1e300, -1]) {
      const { granted } = await client.requestQuota(quota({ amount }));
      assert.ok(Object.is(granted, amount), `${amount} crossed as ${granted}`);
    }
    assert.deepEqual(wireCopy({ a: [NaN, { b: Infinity }] }), { a: [NaN, { b: Infinity }] });
  });

  it("brings errors through the same mapping as gRPC", async () => {
    const handler = new StubHandler();
    const thrown = new SluiceError("QUEUE_FULL", 'throttler "api" has 2 requests waiting (max_queue_size 2); retry with backoff', { pending: 2 });
    handler.onRequest = async () => {
      throw thrown;
    };
    const client = createInMemoryQuotaClient(handler);
    await assert.rejects(client.requestQuota(quota()), (error: unknown) => {
      assert.ok(isSluiceError(error, "QUEUE_FULL"));
      assert.notEqual(error, thrown, "a copy, as if it crossed the wire");
      assert.equal(error.message, thrown.message);
      assert.deepEqual(error.details, { pending: 2 });
      return true;
    });
    handler.onRequest = async () => {
      throw new RangeError("oops");
    };
    await assert.rejects(client.requestQuota(quota()), /CONTROLLER_UNAVAILABLE: .*INTERNAL: .*oops/);
  });

  it("fails calls in flight and later calls with CONTROLLER_UNAVAILABLE after close()", async () => {
    const handler = new StubHandler();
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      return { granted: 0, waitedMs: 0 };
    };
    const client = createInMemoryQuotaClient(handler);
    const inFlight = client.requestQuota(quota());
    const watching = client.watchDynamicSpec("w", () => {}, new AbortController().signal);
    await new Promise((resolve) => setImmediate(resolve));
    client.close();
    await assert.rejects(inFlight, /CONTROLLER_UNAVAILABLE: RequestQuota .* this client was closed/);
    await assert.rejects(watching, /CONTROLLER_UNAVAILABLE/);
    assert.equal(handler.requests[0]?.context.signal.aborted, true);
    await assert.rejects(client.describeThrottlers(), /CONTROLLER_UNAVAILABLE/);
    client.close(); // idempotent
  });

  it("streams dynamic_spec updates in order until the caller aborts, then resolves", async () => {
    const handler = new StubHandler();
    let push: ((update: DynamicSpecUpdate) => void) | undefined;
    let serverSignal: AbortSignal | undefined;
    handler.onWatch = (emit, context) => {
      emit({ version: 1, dynamicSpecJson: '{"throttlers":{}}' });
      push = emit;
      serverSignal = context.signal;
      return untilAborted(context.signal);
    };
    const client = createInMemoryQuotaClient(handler);
    const seen: number[] = [];
    const abort = new AbortController();
    const watching = client.watchDynamicSpec("w", (update) => seen.push(update.version), abort.signal);
    await new Promise((resolve) => setImmediate(resolve));
    push?.({ version: 2, dynamicSpecJson: "{}" });
    push?.({ version: 3, dynamicSpecJson: "{}" });
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(seen, [1, 2, 3]);
    abort.abort();
    await watching;
    assert.equal(serverSignal?.aborted, true);
  });

  it("rejects a watch that the handler ends, so the caller reconnects", async () => {
    const handler = new StubHandler();
    handler.onWatch = async () => {
      throw new SluiceError("CONTROLLER_UNAVAILABLE", "the controller is shutting down; retry against the restarted controller");
    };
    const client = createInMemoryQuotaClient(handler);
    await assert.rejects(
      client.watchDynamicSpec("w", () => {}, new AbortController().signal),
      /CONTROLLER_UNAVAILABLE: the controller is shutting down/,
    );
    handler.onWatch = async () => {};
    await assert.rejects(
      client.watchDynamicSpec("w", () => {}, new AbortController().signal),
      /ended the dynamic_spec watch stream/,
    );
  });
});
