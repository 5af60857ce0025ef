import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSluiceError, ManualClock, systemClock } from "@sluice/core";
import { createGrpcQuotaClient, fromGrpcDeadline, serveQuotaService, toGrpcDeadline } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";

// Deadlines are read on systemClock (performance.timeOrigin + performance.now()); grpc-js reads them
// against Date.now(). A wall clock stepped after the process started (NTP) must not move a call's
// deadline: only the remaining time may cross between the two bases.

describe("gRPC deadlines on one time base", () => {
  it("converts by the remaining time, both ways", () => {
    const clock = new ManualClock(5_000);
    assert.equal(toGrpcDeadline(7_500, clock, 1_700_000_000_000), 1_700_000_002_500);
    assert.equal(fromGrpcDeadline(new Date(1_700_000_002_500), clock, 1_700_000_000_000), 7_500);
    assert.equal(fromGrpcDeadline(Number.POSITIVE_INFINITY, clock, 1_700_000_000_000), null, "no deadline");
  });

  for (const stepMs of [60_000, -60_000]) {
    it(`a RequestQuota times out at its own deadline after the wall clock stepped ${stepMs > 0 ? "ahead" : "back"} by 60 s`, async (t) => {
      const parsed = validateDynamicSpec({ throttlers: { held: { limit: 0 } } });
      assert.ok(parsed.ok);
      const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock: systemClock });
      const server = await serveQuotaService(controller, { port: 0 });
      const client = createGrpcQuotaClient(server.address);
      t.after(async () => {
        client.close();
        controller.close();
        await server.close({ graceMs: 100 });
      });
      const realNow = Date.now.bind(Date);
      t.mock.method(Date, "now", () => realNow() + stepMs);

      const start = performance.now();
      const call = { throttlerId: "held", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: `r${stepMs}` };
      await assert.rejects(client.requestQuota(call, { deadlineAt: systemClock.now() + 1_500 }), (error: unknown) => {
        assert.ok(isSluiceError(error, "QUOTA_TIMEOUT"), String(error));
        return true;
      });
      const waitedMs = performance.now() - start;
      // At its deadline: not at once (the step read as "already past"), nor 60 s late.
      assert.ok(waitedMs >= 1_400 && waitedMs < 6_000, `timed out after ${Math.round(waitedMs)} ms, expected about 1500`);
    });
  }
});
