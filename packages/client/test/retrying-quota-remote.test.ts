import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { throttlerSpecSchema } from "@sluice/spec";
import { RetryingQuotaRemote } from "../src/retrying-quota-remote.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

describe("RetryingQuotaRemote", () => {
  it("returns quota to the class it was fetched for, not the class in force at release (docs/design.md §9.9)", async () => {
    const client = new FakeQuotaClient();
    let classId = "batch";
    const remote = new RetryingQuotaRemote({
      client: () => client,
      throttlerId: "api",
      clientId: "job-1",
      spec: throttlerSpecSchema.parse({}),
      priority: () => 0,
      classId: () => classId,
      clock: new ManualClock(),
    });
    await remote.acquire(10, new AbortController().signal);
    assert.equal(client.calls[0]?.quotaClassId, "batch");
    classId = "interactive"; // a live reconfiguration moves the computation to another class
    await remote.release(4);
    assert.equal(client.releases[0]?.quotaClassId, "batch", "the 4 units were charged to batch");
    await remote.acquire(10, new AbortController().signal);
    assert.equal(client.calls[1]?.quotaClassId, "interactive", "later refills use the new class");
    await remote.release(3);
    assert.equal(client.releases[1]?.quotaClassId, "interactive");
  });
});
