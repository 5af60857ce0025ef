import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Metadata, status as GrpcStatus } from "@grpc/grpc-js";
import { SLUICE_ERROR_CODES, SluiceError, isSluiceError, type SluiceErrorCode } from "@sluice/core";
import {
  ERROR_CODE_METADATA_KEY,
  ERROR_DETAILS_METADATA_KEY,
  GRPC_STATUS_BY_CODE,
  MAX_STATUS_MESSAGE_LENGTH,
  createGrpcQuotaClient,
  fromGrpcError,
  serveQuotaService,
  toServiceError,
  type QuotaServer,
  type QuotaServiceClient,
} from "../src/index.ts";
import { StubHandler, quota } from "./stub-handler.ts";

const site = { method: "RequestQuota", address: "127.0.0.1:7070" };

function grpcError(code: GrpcStatus, details: string, metadata = new Metadata()) {
  return Object.assign(new Error(`${code} ${GrpcStatus[code]}: ${details}`), { code, details, metadata });
}

describe("error mapping, server side", () => {
  it("follows docs/design.md §4.5 for every code a server sends", () => {
    assert.deepEqual(GRPC_STATUS_BY_CODE, {
      SPEC_INVALID: GrpcStatus.INVALID_ARGUMENT,
      THROTTLER_NOT_DECLARED: null,
      UNKNOWN_THROTTLER: GrpcStatus.NOT_FOUND,
      THROTTLER_REMOVED: GrpcStatus.NOT_FOUND,
      INVALID_AMOUNT: GrpcStatus.INVALID_ARGUMENT,
      INVALID_REQUEST: GrpcStatus.INVALID_ARGUMENT,
      QUEUE_FULL: GrpcStatus.RESOURCE_EXHAUSTED,
      QUOTA_TIMEOUT: GrpcStatus.DEADLINE_EXCEEDED,
      CONTROLLER_UNAVAILABLE: GrpcStatus.UNAVAILABLE,
      RETRIES_EXHAUSTED: null,
      CANCELLED: GrpcStatus.CANCELLED,
      UNAUTHENTICATED: GrpcStatus.UNAUTHENTICATED,
      TOO_MANY_CALLS: GrpcStatus.RESOURCE_EXHAUSTED,
      TOO_MANY_KEYS: GrpcStatus.RESOURCE_EXHAUSTED,
      LEASE_EXPIRED: null,
    });
  });

  it("turns a SluiceError into its status, its message and the code in metadata", () => {
    const error = new SluiceError("QUEUE_FULL", 'throttler "api" has 3 requests waiting (max_queue_size 3); retry with backoff', {
      pendingRequests: 3,
    });
    const status = toServiceError(error);
    assert.equal(status.code, GrpcStatus.RESOURCE_EXHAUSTED);
    assert.equal(status.details, error.message);
    assert.deepEqual(status.metadata.get(ERROR_CODE_METADATA_KEY), ["QUEUE_FULL"]);
  });

  it("reports any other thrown value as INTERNAL with its message", () => {
    const status = toServiceError(new TypeError("cannot read properties of undefined"));
    assert.equal(status.code, GrpcStatus.INTERNAL);
    assert.match(status.details, /cannot read properties of undefined/);
    assert.deepEqual(status.metadata.get(ERROR_CODE_METADATA_KEY), []);
    assert.equal(toServiceError("a string").code, GrpcStatus.INTERNAL);
  });
});

describe("error mapping, client side", () => {
  it("takes the code from metadata and keeps the server's message and figures", () => {
    for (const code of SLUICE_ERROR_CODES) {
      const original = new SluiceError(code, `something about ${code} (figure 42)`, { figure: 42, path: "dynamic_spec.x ≥ 0" });
      const mapped = fromGrpcError(toServiceError(original), site);
      assert.equal(mapped.code, code);
      assert.equal(mapped.message, original.message);
      assert.deepEqual(mapped.details, { figure: 42, path: "dynamic_spec.x ≥ 0" });
    }
  });

  it("maps UNAVAILABLE without a code to CONTROLLER_UNAVAILABLE", () => {
    const mapped = fromGrpcError(grpcError(GrpcStatus.UNAVAILABLE, "connect ECONNREFUSED 127.0.0.1:7070"), site);
    assert.equal(mapped.code, "CONTROLLER_UNAVAILABLE");
    assert.equal(mapped.retriable, true);
    assert.match(mapped.message, /127\.0\.0\.1:7070 is unreachable for RequestQuota \(connect ECONNREFUSED/);
  });

  it("maps the client's own DEADLINE_EXCEEDED to QUOTA_TIMEOUT naming the deadline", () => {
    const deadlineAt = Date.UTC(2030, 0, 1, 12, 0, 0);
    const mapped = fromGrpcError(grpcError(GrpcStatus.DEADLINE_EXCEEDED, "Deadline exceeded after 0.2s"), { ...site, deadlineAt });
    assert.equal(mapped.code, "QUOTA_TIMEOUT");
    assert.match(mapped.message, /passed its deadline 2030-01-01T12:00:00\.000Z \(the caller's own deadline\)/);
    assert.match(mapped.message, /same request id resumes its place/);
  });

  it("maps CANCELLED to CANCELLED when the caller cancelled, naming its reason", () => {
    const abort = new AbortController();
    abort.abort(new Error("job stopping"));
    const mapped = fromGrpcError(grpcError(GrpcStatus.CANCELLED, "Cancelled on client"), { ...site, signal: abort.signal });
    assert.equal(mapped.code, "CANCELLED");
    assert.match(mapped.message, /job stopping/);
  });

  it("maps a CANCELLED the caller did not ask for (a controller cut off in shutdown) to CONTROLLER_UNAVAILABLE", () => {
    const mapped = fromGrpcError(grpcError(GrpcStatus.CANCELLED, "Call cancelled"), site);
    assert.equal(mapped.code, "CONTROLLER_UNAVAILABLE");
    assert.match(mapped.message, /cancelled by the controller at 127\.0\.0\.1:7070 or on the way to it \(Call cancelled\), not by the caller/);
  });

  it("maps any other status to CONTROLLER_UNAVAILABLE with the status name and details", () => {
    const mapped = fromGrpcError(grpcError(GrpcStatus.INTERNAL, "the controller failed: boom"), site);
    assert.equal(mapped.code, "CONTROLLER_UNAVAILABLE");
    assert.match(mapped.message, /failed with INTERNAL: the controller failed: boom/);
    assert.equal(fromGrpcError(new Error("socket hang up"), site).code, "CONTROLLER_UNAVAILABLE");
  });
});

describe("error mapping over real gRPC", () => {
  const handler = new StubHandler();
  let server: QuotaServer;
  let client: QuotaServiceClient;
  before(async () => {
    server = await serveQuotaService(handler, { port: 0 });
    client = createGrpcQuotaClient(server.address);
  });
  after(async () => {
    client.close();
    await server.close({ graceMs: 100 });
  });

  const sent = SLUICE_ERROR_CODES.filter((code) => GRPC_STATUS_BY_CODE[code] !== null);
  for (const code of sent) {
    it(`${code} thrown by a handler reaches the client as ${code} with the same message`, async () => {
      const thrown = new SluiceError(code, `handler says ${code} with figures 1, 2, 3`);
      handler.onRequest = async () => {
        throw thrown;
      };
      await assert.rejects(client.requestQuota(quota()), (error: unknown) => {
        assert.ok(isSluiceError(error, code as SluiceErrorCode), String(error));
        assert.equal(error.message, thrown.message);
        return true;
      });
    });
  }

  it("a handler's bug becomes CONTROLLER_UNAVAILABLE (INTERNAL) and the server keeps serving", async () => {
    handler.onRequest = () => {
      throw new TypeError("x is not a function");
    };
    await assert.rejects(client.requestQuota(quota()), /CONTROLLER_UNAVAILABLE: .*INTERNAL: .*x is not a function/);
    handler.onRequest = async (call) => ({ granted: call.amount, waitedMs: 3 });
    assert.deepEqual(await client.requestQuota(quota({ amount: 5 })), { granted: 5, waitedMs: 3 });
  });

  it("a controller that is not there is CONTROLLER_UNAVAILABLE, at once", async () => {
    const nowhere = createGrpcQuotaClient("127.0.0.1:1");
    const started = Date.now();
    await assert.rejects(nowhere.describeThrottlers(), (error: unknown) => isSluiceError(error, "CONTROLLER_UNAVAILABLE"));
    // A wait for the controller to appear would last until the test's timeout; 30 s only bounds it.
    assert.ok(Date.now() - started < 30_000, `does not wait for the controller to appear (${Date.now() - started} ms)`);
    nowhere.close();
  });
});

describe("token", () => {
  it("refuses calls without the right bearer token with UNAUTHENTICATED", async () => {
    const server = await serveQuotaService(new StubHandler(), { port: 0, token: "s3cret" });
    const anonymous = createGrpcQuotaClient(server.address);
    const wrong = createGrpcQuotaClient(server.address, { token: "guess" });
    const right = createGrpcQuotaClient(server.address, { token: "s3cret" });
    try {
      await assert.rejects(anonymous.requestQuota(quota()), /UNAUTHENTICATED: this controller requires a token/);
      await assert.rejects(wrong.describeThrottlers(), /UNAUTHENTICATED: the token in metadata "authorization" does not match/);
      const watch = new AbortController();
      await assert.rejects(
        anonymous.watchDynamicSpec("w", () => {}, watch.signal),
        /UNAUTHENTICATED/,
      );
      assert.deepEqual(await right.requestQuota(quota({ amount: 2 })), { granted: 2, waitedMs: 0 });
    } finally {
      for (const c of [anonymous, wrong, right]) c.close();
      await server.close({ graceMs: 100 });
    }
  });
});

describe("toServiceError keeps a status small enough for any client", () => {
  it("cuts a long message, leaves out large figures, and never leaves a lone surrogate", () => {
    const long = toServiceError(new SluiceError("SPEC_INVALID", `${"é".repeat(3_000)}😀${"x".repeat(100_000)}`, { issues: "y".repeat(20_000) }));
    assert.ok(long.details.length <= MAX_STATUS_MESSAGE_LENGTH, `${long.details.length} characters`);
    assert.match(long.details, /… \(\d+ more characters cut\)$/);
    assert.deepEqual(long.metadata.get(ERROR_DETAILS_METADATA_KEY), [], "figures over the limit are left out");
    assert.deepEqual(long.metadata.get(ERROR_CODE_METADATA_KEY), ["SPEC_INVALID"]);
    // A cut through a surrogate pair, and a handler's own lone surrogate, become U+FFFD.
    const at = MAX_STATUS_MESSAGE_LENGTH - 64 - "SPEC_INVALID: ".length - 1;
    const split = toServiceError(new SluiceError("SPEC_INVALID", `${"a".repeat(at)}😀${"b".repeat(10_000)}`));
    assert.doesNotThrow(() => encodeURI(split.details));
    assert.doesNotThrow(() => encodeURI(toServiceError(new SluiceError("UNKNOWN_THROTTLER", "id \uD800 here")).details));
    const small = toServiceError(new SluiceError("QUEUE_FULL", "short", { limit: 5 }));
    assert.equal(small.details, "QUEUE_FULL: short");
    assert.equal(small.metadata.get(ERROR_DETAILS_METADATA_KEY)[0]?.toString(), '{"limit":5}');
  });
});
