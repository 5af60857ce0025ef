import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Client, credentials } from "@grpc/grpc-js";
import { SluiceError } from "@sluice/core";
import { serveQuotaService, type QuotaServer } from "../src/index.ts";
import { cancelCall, eventually, openStream, requestCall } from "./stream-test-kit.ts";
import { StubHandler } from "./stub-handler.ts";

// The QuotaStream server's answered-at-once path: a handler with requestQuotaNow answers a
// RequestQuota with the result itself (or a promise) instead of through requestQuota. Real gRPC
// over loopback, frames written by hand so that a test decides what shares a frame.

describe("QuotaStream server: RequestQuota answered at once (requestQuotaNow)", () => {
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
  beforeEach(() => {
    handler.requests.length = 0;
    handler.requestsNow.length = 0;
  });

  const open = () => openStream(client);

  it("answers a synchronous throw as that call's error; the frame's other calls and the stream live on", async () => {
    handler.answerNow((call) => {
      if (call.amount === 1) throw new SluiceError("INVALID_REQUEST", "call 1 is refused by the test");
      return { granted: call.amount, waitedMs: 0 };
    });
    const { stream, answers, ended } = open();
    try {
      stream.write({ calls: [requestCall(1), requestCall(2)] });
      await eventually(() => answers().length === 2, "2 answers");
      const [first, second] = answers();
      assert.equal(first?.callId, 1);
      assert.equal(first?.error?.sluiceErrorCode, "INVALID_REQUEST");
      assert.match(first?.error?.message ?? "", /call 1 is refused by the test/);
      assert.equal(second?.callId, 2);
      assert.equal(second?.requestQuota?.granted, 2);
      stream.write({ calls: [requestCall(3)] });
      await eventually(() => answers().length === 3, "the answer to a call after the throw");
      assert.equal(answers()[2]?.requestQuota?.granted, 3);
      assert.equal(ended(), false, "the stream is still open");
      assert.equal(handler.requests.length, 0, "requestQuota is never called when requestQuotaNow is there");
    } finally {
      stream.cancel();
      handler.answerNow();
    }
  });

  it("answers a returned promise when it settles, and at the call's deadline when it never does", async () => {
    let resolveLater!: () => void;
    handler.answerNow((call) => {
      if (call.amount === 1) return new Promise((resolve) => (resolveLater = () => resolve({ granted: 1, waitedMs: 7 })));
      return new Promise(() => {}); // never settles: only the deadline answers it
    });
    const { stream, answers, ended } = open();
    try {
      const sentAt = performance.now();
      stream.write({ calls: [requestCall(1), requestCall(2, { timeoutMs: 300 })] });
      await eventually(() => handler.requestsNow.length === 2, "both calls reach requestQuotaNow");
      assert.equal(handler.requestsNow[1]?.context.deadlineAt !== null, true, "the call's timeout_ms is its context's deadline");
      await eventually(() => answers().length === 1, "the deadline answer of call 2");
      const elapsed = performance.now() - sentAt;
      const timedOut = answers()[0];
      assert.equal(timedOut?.callId, 2);
      assert.equal(timedOut?.error?.sluiceErrorCode, "QUOTA_TIMEOUT");
      // Lower bound only (timers never fire early, less 5 ms of timer rounding); a loaded machine can be late.
      assert.ok(elapsed >= 295, `the deadline answer came ${elapsed.toFixed(0)} ms after the call, before its 300 ms timeout`);
      assert.equal(handler.requestsNow[1]?.context.signal.aborted, true, "the deadline aborts the call's signal");
      resolveLater();
      await eventually(() => answers().length === 2, "the answer of the promise once settled");
      assert.equal(answers()[1]?.callId, 1);
      assert.equal(answers()[1]?.requestQuota?.granted, 1);
      assert.equal(answers()[1]?.requestQuota?.waitedMs, 7);
      assert.equal(ended(), false);
    } finally {
      stream.cancel();
      handler.answerNow();
    }
  });

  it("a cancel in the same frame as its call: a call answered at once keeps its answer; a pending one is cancelled unanswered", async () => {
    handler.answerNow((call) => {
      if (call.amount === 1) return { granted: 1, waitedMs: 0 };
      return new Promise(() => {}); // call 2 waits until cancelled
    });
    const { stream, answers } = open();
    try {
      // Call 1 was answered (and so never open) before its cancel is read: the cancel crossed the
      // answer, as on the wire, and is ignored. Call 2 is open, waiting on its promise: the cancel
      // aborts its signal and forgets it, so no answer is sent for it.
      stream.write({ calls: [requestCall(1), cancelCall(1), requestCall(2), cancelCall(2)] });
      await eventually(() => answers().length >= 1, "the answer of call 1");
      await eventually(() => handler.requestsNow[1]?.context.signal.aborted === true, "call 2's signal aborts");
      // A later call's answer proves the frame was fully served before we count answers.
      handler.answerNow((call) => ({ granted: call.amount, waitedMs: 0 }));
      stream.write({ calls: [requestCall(3)] });
      await eventually(() => answers().some((answer) => answer.callId === 3), "the answer of call 3");
      assert.deepEqual(
        answers().map((answer) => [answer.callId, answer.requestQuota?.granted, answer.error?.sluiceErrorCode]),
        [
          [1, 1, undefined],
          [3, 3, undefined],
        ],
      );
    } finally {
      stream.cancel();
      handler.answerNow();
    }
  });

  it("serves and answers both calls of a duplicate call_id in one frame when each is answered at once", async () => {
    handler.answerNow((call) => ({ granted: call.amount, waitedMs: 0 }));
    const { stream, answers, ended } = open();
    try {
      const again = requestCall(1);
      again.requestQuota = { throttlerId: "api", clientId: "c", amount: 5, timestampMs: 0, quotaClassId: "", requestId: "r1b" };
      stream.write({ calls: [requestCall(1), again] });
      await eventually(() => answers().length === 2, "2 answers");
      // Harmless: a call answered at once is never open, so there is nothing of the first one for
      // the second to collide with — each is a whole call the client sent, served and answered
      // once. The "already open" refusal guards state the server keeps (an open call's entry and
      // deadline), and none is kept here. Our client never reuses an id; a hand-written one that does
      // gets both answers, and a session drops an answer whose id it no longer waits on.
      assert.deepEqual(
        answers().map((answer) => [answer.callId, answer.requestQuota?.granted]),
        [
          [1, 1],
          [1, 5],
        ],
      );
      assert.deepEqual(
        handler.requestsNow.map(({ call }) => call.requestId),
        ["r1", "r1b"],
      );
      assert.equal(ended(), false);
    } finally {
      stream.cancel();
      handler.answerNow();
    }
  });
});
