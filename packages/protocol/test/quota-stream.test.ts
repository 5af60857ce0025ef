import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Client, credentials, Metadata, Server, ServerCredentials, status as GrpcStatus, type ServerDuplexStream } from "@grpc/grpc-js";
import { isSluiceError, SluiceError, systemClock } from "@sluice/core";
import {
  createGrpcQuotaClient,
  createLeaderFollowingClient,
  createStreamQuotaClient,
  quotaServiceDefinition,
  serveQuotaService,
  type QuotaServer,
  type QuotaServiceClient,
} from "../src/index.ts";
import type { WireQuotaStreamAnswer, WireQuotaStreamClientFrame, WireQuotaStreamServerFrame } from "../src/proto-definition.ts";
import { StubHandler, quota, untilAborted } from "./stub-handler.ts";

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 10 ms until it holds; fails after `ms` (generous: the machine is shared). */
async function eventually(check: () => boolean, what: string, ms = 3000): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) assert.fail(`timed out waiting for ${what}`);
    await tick(10);
  }
}

/** A bare grpc-js client of QuotaStream that sends whatever bytes a test gives it. */
function rawStream(address: string, metadata = new Metadata()) {
  const method = quotaServiceDefinition().QuotaStream;
  const client = new Client(address, credentials.createInsecure());
  const stream = client.makeBidiStreamRequest<Buffer, WireQuotaStreamServerFrame>(method.path, (bytes) => bytes, method.responseDeserialize, metadata);
  const frames: WireQuotaStreamServerFrame[] = [];
  let ended: { code: number; details: string; sluiceCode: unknown } | null = null;
  stream.on("data", (frame: WireQuotaStreamServerFrame) => frames.push(frame));
  stream.on("error", (error: { code: number; details: string; metadata: Metadata }) => {
    ended = { code: error.code, details: error.details, sluiceCode: error.metadata.get("sluice-error-code")[0] };
  });
  stream.on("status", (status: { code: number; details: string }) => {
    if (status.code === GrpcStatus.OK) ended = { code: 0, details: status.details, sluiceCode: undefined };
  });
  return {
    frames,
    answers: (): WireQuotaStreamAnswer[] => frames.flatMap((frame) => frame.answers),
    ended: () => ended as { code: number; details: string; sluiceCode: unknown } | null,
    send: (frame: WireQuotaStreamClientFrame) => stream.write(method.requestSerialize(frame)),
    sendBytes: (bytes: Buffer) => stream.write(bytes),
    close: () => {
      stream.cancel();
      client.close();
    },
  };
}

describe("QuotaStream transport", () => {
  const handler = new StubHandler();
  let server: QuotaServer;
  let client: QuotaServiceClient;
  before(async () => {
    server = await serveQuotaService(handler, { port: 0, token: "t" });
    client = createStreamQuotaClient(server.address, { token: "t" });
  });
  after(async () => {
    client.close();
    await server.close({ graceMs: 100 });
  });

  it("hands the handler each call's deadline, its own metadata, and no token", async () => {
    await client.requestQuota(quota({ requestId: "connect" })); // the stream is open: its setup is not in the deadline's figure
    handler.requests.length = 0;
    const deadlineAt = systemClock.now() + 5_000;
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    await client.requestQuota(quota({ amount: 2, timestampMs: 1234, quotaClassId: "gold", requestId: "x" }), { deadlineAt, metadata: { traceparent } });
    await client.requestQuota(quota({ requestId: "y" }));
    const [first, second] = handler.requests;
    assert.deepEqual(first?.call, { throttlerId: "api", clientId: "w1/C/0", amount: 2, timestampMs: 1234, quotaClassId: "gold", requestId: "x" });
    assert.ok(
      first?.context.deadlineAt != null && Math.abs(first.context.deadlineAt - deadlineAt) < 5_000,
      `the handler saw ${Math.round((first?.context.deadlineAt ?? 0) - deadlineAt)} ms off the caller's deadline`,
    );
    assert.equal(first?.context.metadata["traceparent"], traceparent);
    assert.equal(first?.context.metadata["authorization"], undefined, "the token stops at the transport");
    assert.equal(second?.context.deadlineAt, null, "no deadline → null");
    assert.equal(second?.context.metadata["traceparent"], undefined, "metadata is per call, not per stream");
  });

  it("answers many calls of one turn in a few frames, each with its own result", async () => {
    handler.requests.length = 0;
    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 0 });
    const results = await Promise.all(Array.from({ length: 500 }, (_, i) => client.requestQuota(quota({ amount: i, requestId: `many-${i}` }))));
    assert.deepEqual(
      results.map((r) => r.granted),
      Array.from({ length: 500 }, (_, i) => i),
    );
    assert.equal(handler.requests.length, 500);
  });

  it("fails a call the handler does not answer with QUOTA_TIMEOUT at its deadline, and cancels it on the controller", async () => {
    let aborted = 0;
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      aborted += 1;
      throw new Error("aborted");
    };
    const start = performance.now();
    await assert.rejects(client.requestQuota(quota({ requestId: "slow" }), { deadlineAt: systemClock.now() + 150 }), (error: unknown) => {
      assert.ok(isSluiceError(error, "QUOTA_TIMEOUT"), String(error));
      assert.match(error.message, /RequestQuota passed its deadline .* before the controller answered; a retry with the same request id resumes its place/);
      return true;
    });
    const took = performance.now() - start;
    // Not before the deadline; the handler itself never answers, so any answer at all is the
    // deadline's (the ceiling only keeps a wrong answer from looking like a slow machine).
    assert.ok(took >= 120 && took < 30_000, `answered after ${took} ms`);
    await eventually(() => aborted === 1, "the handler's signal to abort at the deadline");
  });

  it("cancels one call when its caller aborts; the others on the stream go on", async () => {
    let aborted = 0;
    const release: (() => void)[] = [];
    handler.onRequest = (call, context) =>
      new Promise((resolve, reject) => {
        release.push(() => resolve({ granted: call.amount, waitedMs: 0 }));
        context.signal.addEventListener("abort", () => {
          aborted += 1;
          reject(new Error("cancelled"));
        });
      });
    const abort = new AbortController();
    const cancelled = client.requestQuota(quota({ requestId: "a" }), { signal: abort.signal });
    const kept = client.requestQuota(quota({ requestId: "b", amount: 7 }));
    await eventually(() => release.length === 2, "both calls at the handler");
    abort.abort(new Error("job stopping"));
    await assert.rejects(cancelled, (error: unknown) => isSluiceError(error, "CANCELLED") && /job stopping/.test(error.message));
    await eventually(() => aborted === 1, "the controller-side cancel");
    for (const answer of release) answer();
    assert.equal((await kept).granted, 7);
    assert.equal(aborted, 1);
  });

  it("carries the handler's SluiceError with its code, figures and leader, as the unary RPC does", async () => {
    handler.onRequest = async () => {
      throw new SluiceError("CONTROLLER_UNAVAILABLE", "this controller is a follower; the leader is 127.0.0.1:9", { leader: "127.0.0.1:9", term: 3 });
    };
    await assert.rejects(client.requestQuota(quota()), (error: unknown) => {
      assert.ok(isSluiceError(error, "CONTROLLER_UNAVAILABLE"), String(error));
      assert.equal(error.message, "CONTROLLER_UNAVAILABLE: this controller is a follower; the leader is 127.0.0.1:9");
      assert.deepEqual(error.details, { leader: "127.0.0.1:9", term: 3 });
      return true;
    });
    handler.onRequest = async () => {
      throw new Error("a bug");
    };
    await assert.rejects(client.requestQuota(quota()), /CONTROLLER_UNAVAILABLE: .*failed with INTERNAL: the controller failed while handling the call: a bug/);
    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 0 });
  });

  it("carries releases, lease renewals (UNIMPLEMENTED-free) and dynamic_spec pushes", async () => {
    handler.releases.length = 0;
    await client.releaseQuota({ throttlerId: "api", clientId: "w1/C/0", amount: 3, quotaClassId: "gold" });
    assert.deepEqual(handler.releases, [{ throttlerId: "api", clientId: "w1/C/0", amount: 3, quotaClassId: "gold" }]);
    // StubHandler has no renewLeases: the stream answers as the unary RPC does.
    await assert.rejects(client.renewLeases?.({ clientId: "w1", throttlerIds: ["db"] }) ?? Promise.resolve(), /does not implement RenewLeases/);
    handler.onWatch = (emit, context) => {
      emit({ version: 1, dynamicSpecJson: "{}" });
      emit({ version: 2, dynamicSpecJson: '{"throttlers":{}}' });
      return untilAborted(context.signal);
    };
    const seen: number[] = [];
    const abort = new AbortController();
    const watching = client.watchDynamicSpec("w1", (update) => seen.push(update.version), abort.signal);
    await eventually(() => seen.length === 2, "two updates");
    abort.abort();
    await watching;
    assert.deepEqual(seen, [1, 2]);
  });

  it("sends a call too large for a frame as its unary RPC", async () => {
    handler.requests.length = 0;
    const requestId = "r".repeat(300_000);
    assert.equal((await client.requestQuota(quota({ requestId }))).granted, 1);
    assert.equal(handler.requests[0]?.call.requestId.length, 300_000);
  });

  it("refuses a stream without the token with UNAUTHENTICATED", async () => {
    const anonymous = createStreamQuotaClient(server.address);
    try {
      await assert.rejects(anonymous.requestQuota(quota()), (error: unknown) => isSluiceError(error, "UNAUTHENTICATED") && error.retriable === false);
    } finally {
      anonymous.close();
    }
  });
});

describe("QuotaStream server: bad frames and ends", () => {
  const handler = new StubHandler();
  let server: QuotaServer;
  before(async () => {
    server = await serveQuotaService(handler, { port: 0 });
  });
  after(async () => {
    await server.close({ graceMs: 100 });
  });

  it("answers a call without a kind, with call_id 0 or with an id already open with INVALID_REQUEST, and serves the rest", async () => {
    handler.onRequest = (call, context) =>
      call.requestId === "hold"
        ? untilAborted(context.signal).then(() => ({ granted: 0, waitedMs: 0 }))
        : Promise.resolve({ granted: call.amount, waitedMs: 0 });
    const raw = rawStream(server.address);
    try {
      const request = (requestId: string, amount = 1) => ({ throttlerId: "api", clientId: "c", amount, timestampMs: 0, quotaClassId: "", requestId });
      raw.send({
        calls: [
          { callId: 1, timeoutMs: 0, metadata: {} },
          { callId: 0, timeoutMs: 0, metadata: {}, requestQuota: request("zero") },
          { callId: 2, timeoutMs: 0, metadata: {}, requestQuota: request("hold") },
          { callId: 2, timeoutMs: 0, metadata: {}, requestQuota: request("again") },
          { callId: 3, timeoutMs: 0, metadata: {}, requestQuota: request("fine", 5) },
        ],
      });
      await eventually(() => raw.answers().length === 4, "four answers");
      const byId = new Map(raw.answers().map((answer) => [answer.callId, answer]));
      assert.match(byId.get(1)?.error?.message ?? "", /^INVALID_REQUEST: QuotaStream: call 1 names no call/);
      assert.match(byId.get(0)?.error?.message ?? "", /^INVALID_REQUEST: QuotaStream: call_id must be a number above 0, got 0/);
      assert.match(byId.get(2)?.error?.message ?? "", /^INVALID_REQUEST: QuotaStream: call_id 2 is already open on this stream/);
      assert.equal(byId.get(2)?.error?.grpcStatus, GrpcStatus.INVALID_ARGUMENT);
      assert.equal(byId.get(2)?.error?.sluiceErrorCode, "INVALID_REQUEST");
      assert.equal(byId.get(3)?.requestQuota?.granted, 5);
      assert.equal(raw.ended(), null, "the stream stays open");
      // The held call is still open: cancelling it on the stream answers nothing and aborts it.
      raw.send({ calls: [{ callId: 2, timeoutMs: 0, metadata: {}, cancel: {} }] });
      raw.send({ calls: [{ callId: 4, timeoutMs: 0, metadata: {}, requestQuota: request("after", 2) }] });
      await eventually(() => raw.answers().some((answer) => answer.callId === 4), "the next call's answer");
      assert.equal(raw.answers().filter((answer) => answer.callId === 2).length, 1, "a cancelled call is not answered");
    } finally {
      raw.close();
    }
  });

  it("ends a stream whose frame does not decode with INVALID_REQUEST, cancels its open calls, and keeps serving", async () => {
    let aborted = 0;
    handler.onRequest = async (_call, context) => {
      await untilAborted(context.signal);
      aborted += 1;
      return { granted: 0, waitedMs: 0 };
    };
    const raw = rawStream(server.address);
    try {
      raw.send({
        calls: [
          {
            callId: 1,
            timeoutMs: 0,
            metadata: {},
            requestQuota: { throttlerId: "api", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: "w" },
          },
        ],
      });
      await eventually(() => handler.requests.some((r) => r.call.requestId === "w"), "the call at the handler");
      raw.sendBytes(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]));
      await eventually(() => raw.ended() !== null, "the stream's end");
      assert.equal(raw.ended()?.code, GrpcStatus.INVALID_ARGUMENT);
      assert.equal(raw.ended()?.sluiceCode, "INVALID_REQUEST");
      assert.match(raw.ended()?.details ?? "", /the QuotaStream request \(7 bytes\) is not a valid QuotaStreamClientFrame message/);
      await eventually(() => aborted === 1, "the open call cancelled");
    } finally {
      raw.close();
    }
    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 0 });
    const fresh = createStreamQuotaClient(server.address);
    try {
      assert.equal((await fresh.requestQuota(quota({ amount: 4 }))).granted, 4);
    } finally {
      fresh.close();
    }
  });

  it("cancels every waiting call of a stream that ends and keeps nothing of it", async () => {
    let waiting = 0;
    let aborted = 0;
    handler.onRequest = async (_call, context) => {
      waiting += 1;
      await untilAborted(context.signal);
      aborted += 1;
      throw new Error("cancelled");
    };
    const streamClient = createStreamQuotaClient(server.address);
    const calls = Array.from({ length: 50 }, (_, i) => streamClient.requestQuota(quota({ requestId: `end-${i}` })).catch((error: unknown) => error));
    await eventually(() => waiting === 50, "50 waiting calls");
    streamClient.close();
    for (const outcome of await Promise.all(calls))
      assert.ok(isSluiceError(outcome, "CONTROLLER_UNAVAILABLE") && /this client was closed/.test(outcome.message), String(outcome));
    await eventually(() => aborted === 50, "every waiting call cancelled on the controller");
  });
});

describe("QuotaStream: failover", () => {
  it("follows a follower's redirect and, when the leader's stream drops, retries the call elsewhere under the same request id", async () => {
    const leaderHandler = new StubHandler();
    const followerHandler = new StubHandler();
    const leader = await serveQuotaService(leaderHandler, { port: 0 });
    const follower = await serveQuotaService(followerHandler, { port: 0 });
    followerHandler.onRequest = async () => {
      throw new SluiceError("CONTROLLER_UNAVAILABLE", "not the leader", { leader: leader.address });
    };
    const lines: string[] = [];
    const client = createLeaderFollowingClient([follower.address, leader.address], {
      connect: (address) => createStreamQuotaClient(address),
      log: (line) => lines.push(line),
    });
    try {
      assert.equal((await client.requestQuota(quota({ requestId: "same", amount: 3 }))).granted, 3);
      assert.equal(client.currentAddress, leader.address);
      assert.deepEqual(
        followerHandler.requests.map((r) => r.call.requestId),
        ["same"],
      );
      assert.deepEqual(
        leaderHandler.requests.map((r) => r.call.requestId),
        ["same"],
      );
      // The leader goes away mid-call: its stream ends, and the call is sent to the next controller.
      leaderHandler.onRequest = (_call, context) => untilAborted(context.signal).then(() => ({ granted: 0, waitedMs: 0 }));
      followerHandler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 0 });
      const moved = client.requestQuota(quota({ requestId: "in-flight", amount: 2 }));
      await eventually(() => leaderHandler.requests.some((r) => r.call.requestId === "in-flight"), "the call at the leader");
      await leader.close({ graceMs: 0 });
      assert.equal((await moved).granted, 2);
      assert.deepEqual(
        followerHandler.requests.map((r) => r.call.requestId),
        ["same", "in-flight"],
      );
    } finally {
      client.close();
      await Promise.all([leader.close({ graceMs: 0 }), follower.close({ graceMs: 0 })]);
    }
  });

  it("ends its streams promptly when the server closes with no call open", async () => {
    const server = await serveQuotaService(new StubHandler(), { port: 0 });
    const client = createStreamQuotaClient(server.address);
    try {
      await client.requestQuota(quota());
      const start = performance.now();
      // Prompt: well under the grace it would otherwise wait out, however slow a loaded machine is.
      await server.close({ graceMs: 60_000 });
      assert.ok(performance.now() - start < 30_000, `close took ${performance.now() - start} ms with an idle stream open`);
      await assert.rejects(client.requestQuota(quota()), (error: unknown) => isSluiceError(error, "CONTROLLER_UNAVAILABLE"));
    } finally {
      client.close();
    }
  });
});

describe("RenewLeases over both transports", () => {
  it("is served as a unary RPC and on the stream, with the handler's figure", async () => {
    const handler = Object.assign(new StubHandler(), {
      renewed: [] as string[][],
      async renewLeases(call: { clientId: string; throttlerIds: readonly string[] }) {
        this.renewed.push([call.clientId, ...call.throttlerIds]);
        return { held: 4 };
      },
    });
    const server = await serveQuotaService(handler, { port: 0 });
    const unary = createGrpcQuotaClient(server.address);
    const stream = createStreamQuotaClient(server.address);
    try {
      assert.deepEqual(await unary.renewLeases?.({ clientId: "w1", throttlerIds: ["db"] }), { held: 4 });
      assert.deepEqual(await stream.renewLeases?.({ clientId: "w2", throttlerIds: ["db", "pool"] }), { held: 4 });
      assert.deepEqual(handler.renewed, [
        ["w1", "db"],
        ["w2", "db", "pool"],
      ]);
    } finally {
      unary.close();
      stream.close();
      await server.close({ graceMs: 0 });
    }
  });
});

// A server that records the frames it receives, to see the client coalesce the calls of one turn.
describe("QuotaStream client: one frame per turn", () => {
  let server: Server;
  let address = "";
  const frames: WireQuotaStreamClientFrame[] = [];
  before(async () => {
    server = new Server();
    const definition = quotaServiceDefinition();
    server.addService(
      { QuotaStream: definition.QuotaStream },
      {
        QuotaStream: (call: ServerDuplexStream<WireQuotaStreamClientFrame, WireQuotaStreamServerFrame>) => {
          call.on("data", (frame: WireQuotaStreamClientFrame) => {
            frames.push(frame);
            const answers = frame.calls
              .filter((c) => c.requestQuota)
              .map((c) => ({ callId: c.callId, requestQuota: { granted: c.requestQuota?.amount ?? 0, waitedMs: 0, paceStartDelayMs: 0, paceIntervalMs: 0 } }));
            call.write({ answers });
          });
          call.on("end", () => call.end());
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    address = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());

  it("sends the calls made in one turn of the event loop as one message", async () => {
    const client = createStreamQuotaClient(address);
    try {
      await client.requestQuota(quota({ requestId: "warm" }));
      frames.length = 0;
      const results = await Promise.all(Array.from({ length: 300 }, (_, i) => client.requestQuota(quota({ requestId: `t-${i}`, amount: i }))));
      assert.deepEqual(
        results.map((r) => r.granted),
        Array.from({ length: 300 }, (_, i) => i),
      );
      assert.equal(frames.length, 1, `300 calls of one turn came in ${frames.length} frames`);
      assert.equal(frames[0]?.calls.length, 300);
      assert.deepEqual(frames[0]?.calls.map((c) => c.requestQuota?.requestId).slice(0, 3), ["t-0", "t-1", "t-2"]);
    } finally {
      client.close();
    }
  });
});
