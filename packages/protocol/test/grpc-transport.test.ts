import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isSluiceError, systemClock } from "@sluice/core";
import { createGrpcQuotaClient, serveQuotaService, type QuotaServer, type QuotaServiceClient } from "../src/index.ts";
import { StubHandler, quota, untilAborted } from "./stub-handler.ts";

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * How far the handler's deadline may be off the caller's: the remaining time travels, so the transit
 * shows up (seconds on a loaded machine); what must be told apart is a 60 s clock step or a lost one.
 */
const TRANSIT_MS = 5_000;

/**
 * Polls `check` every 10 ms until it holds: a condition instead of a fixed sleep, which a loaded
 * machine outlasts. Up to 30 s, which only bounds a hang.
 */
async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 30_000;
  while (!check()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await tick(10);
  }
}

describe("gRPC transport", () => {
  const handler = new StubHandler();
  let server: QuotaServer;
  let client: QuotaServiceClient;
  before(async () => {
    server = await serveQuotaService(handler, { port: 0, token: "t" });
    client = createGrpcQuotaClient(server.address, { token: "t" });
  });
  after(async () => {
    client.close();
    await server.close({ graceMs: 100 });
  });

  it("listens on 127.0.0.1 by default and reports the bound port", () => {
    assert.match(server.address, /^127\.0\.0\.1:\d+$/);
    assert.ok(server.port > 0);
    assert.equal(server.address, `127.0.0.1:${server.port}`);
  });

  it("hands the handler the call's deadline (epoch ms), its metadata, and no token", async () => {
    // Connected first: the remaining time travels when the call is made, and a connection set up on
    // a loaded machine (100+ ms) would show up as a later deadline on the server.
    await client.describeThrottlers();
    handler.requests.length = 0;
    const deadlineAt = systemClock.now() + 5_000;
    await client.requestQuota(quota({ amount: 2, timestampMs: 1234, quotaClassId: "gold", requestId: "x" }), {
      deadlineAt,
      metadata: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
    });
    const seen = handler.requests[0];
    assert.deepEqual(seen?.call, { throttlerId: "api", clientId: "w1/C/0", amount: 2, timestampMs: 1234, quotaClassId: "gold", requestId: "x" });
    assert.ok(
      seen?.context.deadlineAt !== null && Math.abs((seen?.context.deadlineAt ?? 0) - deadlineAt) < TRANSIT_MS,
      `the handler saw ${Math.round((seen?.context.deadlineAt ?? 0) - deadlineAt)} ms off the caller's deadline (a transit on a loaded machine, not a 60 s clock step)`,
    );
    assert.equal(seen?.context.metadata["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert.equal(seen?.context.metadata["authorization"], undefined, "the token stops at the transport");
    await client.requestQuota(quota());
    assert.equal(handler.requests[1]?.context.deadlineAt, null, "no deadline → null");
  });

  for (const stepMs of [60_000, -60_000]) {
    it(`the handler sees the caller's deadline on its clock after the wall clock stepped by ${stepMs / 1000} s`, async (t) => {
      handler.requests.length = 0;
      handler.onRequest = async () => ({ granted: 1, waitedMs: 0 });
      const realNow = Date.now.bind(Date);
      t.mock.method(Date, "now", () => realNow() + stepMs); // grpc-js reads Date.now(); systemClock does not
      const deadlineAt = systemClock.now() + 5_000;
      assert.deepEqual(await client.requestQuota(quota(), { deadlineAt }), { granted: 1, waitedMs: 0 });
      const seen = handler.requests[0]?.context.deadlineAt ?? Number.NaN;
      assert.ok(Math.abs(seen - deadlineAt) < TRANSIT_MS, `the handler saw ${Math.round(seen - deadlineAt)} ms off the caller's deadline`);
    });
  }

  it("carries a smooth throttler's schedule (pace fields) and leaves them out of unpaced answers", async () => {
    const saved = handler.onRequest;
    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 4, paceStartDelayMs: 12.5, paceIntervalMs: 104.16666666666667 });
    try {
      assert.deepEqual(await client.requestQuota(quota({ amount: 3 })), {
        granted: 3,
        waitedMs: 4,
        paceStartDelayMs: 12.5,
        paceIntervalMs: 104.16666666666667,
      });
      handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 0 });
      assert.deepEqual(await client.requestQuota(quota({ amount: 3 })), { granted: 3, waitedMs: 0 });
    } finally {
      handler.onRequest = saved;
    }
  });

  it("a client abort cancels the call: CANCELLED for the caller, an aborted signal for the handler", async () => {
    handler.requests.length = 0;
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      return { granted: 0, waitedMs: 0 };
    };
    const abort = new AbortController();
    const call = client.requestQuota(quota(), { signal: abort.signal });
    await until(() => handler.requests.length === 1, "the call at the handler");
    abort.abort(new Error("job stopping"));
    await assert.rejects(call, (error: unknown) => isSluiceError(error, "CANCELLED") && /job stopping/.test(error.message));
    await until(() => handler.requests[0]?.context.signal.aborted === true, "the handler's signal aborted");
  });

  it("the call's deadline is QUOTA_TIMEOUT for the caller and aborts the handler's signal", async () => {
    handler.requests.length = 0;
    const started = Date.now();
    await assert.rejects(client.requestQuota(quota(), { deadlineAt: systemClock.now() + 200 }), (error: unknown) => isSluiceError(error, "QUOTA_TIMEOUT"));
    const waited = Date.now() - started;
    // Not before the deadline; the stub never answers, so any answer is the deadline's (the ceiling
    // only bounds a hang, whatever load adds).
    assert.ok(waited >= 150 && waited < 30_000, `waited ${waited} ms`);
    await until(() => handler.requests[0]?.context.signal.aborted === true, "the handler's signal aborted");
  });

  it("streams dynamic_spec updates and resolves when the caller aborts", async () => {
    let push: ((version: number) => void) | undefined;
    handler.onWatch = (emit, context) => {
      emit({ version: 1, dynamicSpecJson: "{}" });
      push = (version) => emit({ version, dynamicSpecJson: `{"v":${version}}` });
      return untilAborted(context.signal);
    };
    const seen: string[] = [];
    const abort = new AbortController();
    const watching = client.watchDynamicSpec("w", (u) => seen.push(`${u.version}:${u.dynamicSpecJson}`), abort.signal);
    await until(() => seen.length === 1, "the first update");
    push?.(2);
    await until(() => seen.length === 2, "the pushed update");
    abort.abort();
    await watching;
    assert.deepEqual(seen, ["1:{}", '2:{"v":2}']);
  });

  it("close() of the client fails its calls in flight with CONTROLLER_UNAVAILABLE", async () => {
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      return { granted: 0, waitedMs: 0 };
    };
    const own = createGrpcQuotaClient(server.address, { token: "t" });
    const call = own.requestQuota(quota());
    await tick(50);
    own.close();
    await assert.rejects(call, /CONTROLLER_UNAVAILABLE: RequestQuota .* this client was closed/);
    await assert.rejects(own.describeThrottlers(), /CONTROLLER_UNAVAILABLE/);
  });
});

describe("gRPC server close", () => {
  it("cancels calls still running after the grace, so close always finishes", async () => {
    const handler = new StubHandler();
    let handlerSignal: AbortSignal | undefined;
    handler.onRequest = async (_call, context) => {
      handlerSignal = context.signal;
      await new Promise(() => {}); // a handler that never answers
      return { granted: 0, waitedMs: 0 };
    };
    const server = await serveQuotaService(handler, { port: 0 });
    const client = createGrpcQuotaClient(server.address);
    const call = client.requestQuota(quota());
    await until(() => handlerSignal !== undefined, "the call at the handler");
    const started = Date.now();
    await server.close({ graceMs: 200 });
    // The handler never answers: without the cancel after the grace, close would not finish at all.
    assert.ok(Date.now() - started < 30_000, `close took ${Date.now() - started} ms`);
    await assert.rejects(call, (error: unknown) => isSluiceError(error) && error.retriable);
    assert.equal(handlerSignal?.aborted, true);
    client.close();
    await server.close(); // idempotent
  });
});
