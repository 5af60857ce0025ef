import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Client, credentials, Metadata } from "@grpc/grpc-js";
import { unreadQuotaStreams } from "../../../test/support/unread-quota-stream.ts";
import { createStreamQuotaClient, quotaServiceDefinition, serveQuotaService, type QuotaServer } from "../src/index.ts";
import type { WireQuotaStreamAnswer, WireQuotaStreamServerFrame } from "../src/proto-definition.ts";
import { StubHandler, quota, untilAborted } from "./stub-handler.ts";

// docs/design.md §5.3: a QuotaStream holds at most `controller.max_open_calls_per_stream` open calls, the
// server honours the stream's write backpressure, and a client that reads nothing stops being read.

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(check: () => boolean, what: () => string, ms = 20_000): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) assert.fail(`timed out waiting for ${what()}`);
    await tick(20);
  }
}

const servers: QuotaServer[] = [];
after(async () => {
  for (const server of servers) await server.close({ graceMs: 100 });
});

describe("QuotaStream bounds", () => {
  it("refuses calls past max_open_calls_per_stream at once with TOO_MANY_CALLS and the figures", async () => {
    const handler = new StubHandler();
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      throw new Error("cancelled");
    };
    const server = await serveQuotaService(handler, { port: 0, maxOpenCallsPerStream: 3 });
    servers.push(server);
    const method = quotaServiceDefinition().QuotaStream;
    const client = new Client(server.address, credentials.createInsecure());
    const stream = client.makeBidiStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, new Metadata());
    const answers: WireQuotaStreamAnswer[] = [];
    stream.on("data", (frame: WireQuotaStreamServerFrame) => answers.push(...frame.answers));
    stream.on("error", () => {});
    const call = (callId: number) => ({ callId, timeoutMs: 0, metadata: {}, requestQuota: quota({ requestId: `r${callId}` }) });
    stream.write({ calls: [1, 2, 3, 4, 5].map(call) });
    await eventually(
      () => answers.length >= 2,
      () => `2 refusals, got ${answers.length}`,
    );
    assert.deepEqual(answers.map((a) => a.callId).sort(), [4, 5]);
    const refusal = answers[0]?.error;
    assert.equal(refusal?.sluiceErrorCode, "TOO_MANY_CALLS");
    assert.match(refusal?.message ?? "", /already has 3 open calls, the most controller\.max_open_calls_per_stream allows \(3\)/);
    assert.deepEqual(JSON.parse(refusal?.detailsJson ?? "{}"), {
      method: "QuotaStream",
      callId: refusal?.message.includes("call 4") ? 4 : 5,
      openCalls: 3,
      maxOpenCalls: 3,
      field: "controller.max_open_calls_per_stream",
    });
    assert.equal(handler.requests.length, 3, "the refused calls never reached the handler");
    // An answered call makes room again.
    stream.write({ calls: [{ callId: 1, timeoutMs: 0, metadata: {}, cancel: {} }, call(6)] });
    await eventually(
      () => handler.requests.length === 4,
      () => `call 6 started (${handler.requests.length} started)`,
    );
    stream.cancel();
    client.close();
  });

  it("our stream client queues past the bound instead of hitting TOO_MANY_CALLS, learning a lower bound", async () => {
    const handler = new StubHandler();
    let open = 0;
    let mostOpen = 0;
    handler.onRequest = async (call) => {
      open += 1;
      mostOpen = Math.max(mostOpen, open);
      await tick(30);
      open -= 1;
      return { granted: call.amount, waitedMs: 0 };
    };
    const server = await serveQuotaService(handler, { port: 0, maxOpenCallsPerStream: 5 });
    servers.push(server);
    // The client believes the default (4096): the controller's first refusals teach it 5.
    const client = createStreamQuotaClient(server.address);
    try {
      const results = await Promise.allSettled(Array.from({ length: 60 }, (_, i) => client.requestQuota(quota({ requestId: `q${i}` }))));
      const failed = results.filter((r) => r.status === "rejected");
      assert.deepEqual(failed, [], "no call failed (a TOO_MANY_CALLS would be one)");
      assert.ok(mostOpen <= 5, `at most 5 calls open on the controller at once, saw ${mostOpen}`);
      // Sent under a bound it already knows, the client is refused nothing: a second wave all succeeds.
      const again = await Promise.all(Array.from({ length: 20 }, (_, i) => client.requestQuota(quota({ requestId: `s${i}` }))));
      assert.equal(again.length, 20);
    } finally {
      client.close();
    }
  });

  it("a client that reads no answers stops being read, and nothing it sent is lost once it reads", async () => {
    const handler = new StubHandler();
    // Every watch gets a 10 KB spec at once and stays open: the answers are what the client does not read.
    const spec = JSON.stringify({
      throttlers: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`t${i}`, { limit: i + 1, period: 10_000, pad: "x".repeat(40) }])),
    });
    let watches = 0;
    handler.onWatch = (emit, context) => {
      watches += 1;
      emit({ version: 1, dynamicSpecJson: spec });
      return untilAborted(context.signal);
    };
    const server = await serveQuotaService(handler, { port: 0, maxOpenCallsPerStream: 1_000_000 });
    servers.push(server);
    const total = 5_000;
    const hostile = unreadQuotaStreams(server.address, { streams: 1, callsPerStream: total, perFrame: 500 });
    try {
      // Wait until what the controller starts stops growing: its answers back up, and it reads no more.
      let seen = -1;
      for (let stable = 0; stable < 5; ) {
        await tick(200);
        if (watches === seen) stable += 1;
        else stable = 0;
        seen = watches;
      }
      assert.ok(
        watches < total / 2,
        `the controller kept reading calls whose answers nobody read: ${watches} of ${total} watches started (spec ${spec.length} B each)`,
      );
      console.log(`unread stream: ${watches} of ${total} watches started before the controller stopped reading`);
      hostile.startReading();
      await eventually(
        () => hostile.answersRead >= total,
        () => `${total} answers read, got ${hostile.answersRead} (${watches} watches started)`,
        60_000,
      );
      assert.equal(watches, total);
      assert.deepEqual([...hostile.errorsRead], [], "no call was refused or failed");
    } finally {
      hostile.close();
    }
  });
});
