import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSluiceError } from "@sluice/core";
import { createQuotaClient, parseQuotaTransport, serveQuotaService } from "../src/index.ts";
import { StubHandler, quota } from "./stub-handler.ts";

describe("choosing the quota transport", () => {
  it("reads SLUICE_QUOTA_TRANSPORT: stream by default, unary on request, anything else refused with the choices", () => {
    assert.equal(parseQuotaTransport(undefined), "stream");
    assert.equal(parseQuotaTransport(""), "stream");
    assert.equal(parseQuotaTransport(" Unary "), "unary");
    assert.equal(parseQuotaTransport("stream"), "stream");
    assert.throws(
      () => parseQuotaTransport("grpc"),
      (error: unknown) =>
        isSluiceError(error, "SPEC_INVALID") &&
        error.message ===
          'SPEC_INVALID: SLUICE_QUOTA_TRANSPORT is "grpc": choose "stream" (one multiplexed stream per worker, the default) or "unary" (one RPC per call)',
    );
  });

  it("serves the same answers over either transport", async () => {
    const handler = new StubHandler();
    const server = await serveQuotaService(handler, { port: 0 });
    const clients = [createQuotaClient(server.address, { transport: "stream" }), createQuotaClient(server.address, { transport: "unary" })];
    try {
      for (const client of clients) assert.deepEqual(await client.requestQuota(quota({ amount: 3 })), { granted: 3, waitedMs: 0 });
      assert.equal(handler.requests.length, 2);
    } finally {
      for (const client of clients) client.close();
      await server.close({ graceMs: 0 });
    }
  });
});
