import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client, credentials } from "@grpc/grpc-js";
import { serveQuotaService, type QuotaServer } from "../src/index.ts";
import { CALLS_PER_TURN } from "../src/quota-stream-server.ts";
import { eventually, openStream, requestCall, tick } from "./stream-test-kit.ts";
import { StubHandler, untilAborted } from "./stub-handler.ts";

// The server starts at most CALLS_PER_TURN calls of one stream per turn of the event loop, so the
// answers of a backlog's first calls leave before its last calls start. Real gRPC over loopback;
// about a second.

describe("QuotaStream server: a bounded number of calls per turn", () => {
  const handler = new StubHandler();
  let server: QuotaServer;
  let client: Client;
  before(async () => {
    server = await serveQuotaService(handler, { port: 0 });
    client = new Client(server.address, credentials.createInsecure());
  });
  after(async () => {
    client.close();
    await server.close({ graceMs: 100 });
  });

  const open = () => openStream(client);

  it("answers a frame of 5,000 calls in order (pausing the stream past its backlog bound), the first answers in a frame of at most CALLS_PER_TURN", async () => {
    const started: number[] = [];
    handler.onRequest = async (call) => {
      started.push(call.amount);
      return { granted: call.amount, waitedMs: 0 };
    };
    const { stream, frames, answers } = open();
    try {
      const count = 5_000;
      stream.write({ calls: Array.from({ length: count }, (_, i) => requestCall(i + 1)) });
      await eventually(() => answers().length === count, `${count} answers`);
      assert.deepEqual(
        started,
        Array.from({ length: count }, (_, i) => i + 1),
        "calls start in the order they arrived",
      );
      assert.deepEqual(
        answers().map((answer) => [answer.callId, answer.requestQuota?.granted]),
        Array.from({ length: count }, (_, i) => [i + 1, i + 1]),
      );
      assert.ok((frames[0]?.answers.length ?? 0) <= CALLS_PER_TURN, `the first answer frame carried ${frames[0]?.answers.length} answers`);
      assert.ok(CALLS_PER_TURN < count && frames.length >= Math.ceil(count / CALLS_PER_TURN), `${frames.length} answer frames for ${count} calls`);
    } finally {
      stream.cancel();
    }
  });

  it("applies a cancel that waits behind the bound to the call it names, and cancels unstarted calls with the stream", async () => {
    let aborted = 0;
    handler.onRequest = async (call, context) => {
      if (call.requestId.startsWith("hold")) {
        await untilAborted(context.signal);
        aborted += 1;
        throw new Error("aborted");
      }
      return { granted: call.amount, waitedMs: 0 };
    };
    const { stream, answers } = open();
    const last = CALLS_PER_TURN + 50;
    const calls = Array.from({ length: last }, (_, i) => requestCall(i + 1, { requestId: i + 1 === last ? "hold-late" : `r${i + 1}` }));
    calls.push({ callId: last, timeoutMs: 0, metadata: {}, cancel: {} });
    stream.write({ calls });
    await eventually(() => aborted === 1, "the late call cancelled");
    await eventually(() => answers().length === last - 1, `${last - 1} answers`);
    await tick(50);
    assert.equal(answers().filter((answer) => answer.callId === last).length, 0, "a cancelled call is not answered");
    stream.cancel();
  });
});
