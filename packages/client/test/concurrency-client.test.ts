import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { createInMemoryQuotaClient, type QuotaServiceHandler, type RenewLeasesCall, type ReleaseQuotaCall, type RequestQuotaCall } from "@sluice/protocol";
import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { DistributedThrottlerFactory } from "../src/index.ts";

// A job's client of a concurrency throttler against a recording handler (in-memory transport, so
// the calls cross the same copy-and-deadline path as over gRPC): no prefetch, one RequestQuota per
// throttle() for exactly its units, renewals while it holds units, and everything back on close.

function dynamicSpec(input: unknown): DynamicSpec {
  const result = validateDynamicSpec(input);
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

class RecordingHandler implements QuotaServiceHandler {
  readonly requests: RequestQuotaCall[] = [];
  readonly releases: ReleaseQuotaCall[] = [];
  readonly renewals: { call: RenewLeasesCall; at: number }[] = [];
  constructor(private readonly clock: ManualClock) {}
  async requestQuota(call: RequestQuotaCall) {
    this.requests.push(call);
    return { granted: call.amount, waitedMs: 0 };
  }
  async releaseQuota(call: ReleaseQuotaCall) {
    this.releases.push(call);
  }
  async renewLeases(call: RenewLeasesCall) {
    this.renewals.push({ call, at: this.clock.now() });
    return { held: 0 };
  }
  watchDynamicSpec() {}
  async updateDynamicSpec() {
    return { version: 1 };
  }
  async describeThrottlers() {
    return { snapshotJson: "{}" };
  }
}

function setup() {
  const clock = new ManualClock(1_000_000);
  const handler = new RecordingHandler(clock);
  const client = createInMemoryQuotaClient(handler, { clock });
  const factory = new DistributedThrottlerFactory({ computation: "Admitter", clientId: "w1/Admitter/0", client: () => client, clock });
  factory.reconfigure(dynamicSpec({ throttlers: { tasks: { kind: "concurrency", limit: 10, lease_timeout: "3s" } } }));
  return { clock, handler, factory, tasks: factory.getThrottlerOrThrow("tasks") };
}

describe("concurrency throttler client", () => {
  it("asks for exactly the units of each throttle(), holds no spare units, and releases at most what it holds", async () => {
    const { handler, factory, tasks } = setup();
    assert.equal(factory.isConcurrency("tasks"), true);
    await tasks.throttle(2);
    await tasks.throttle(1);
    assert.deepEqual(handler.requests.map((r) => r.amount), [2, 1]);
    assert.equal(tasks.tryAcquire(1), false, "no local pool to take from");
    tasks.release(5);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(handler.releases.map((r) => r.amount), [3], "only the 3 units it held");
    factory.close();
  });

  it("renews its lease every lease_timeout / 3 while it holds units, and stops once it holds none", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(1);
    await clock.advance(3_000);
    assert.deepEqual(handler.renewals.map((r) => r.at - 1_000_000), [1_000, 2_000, 3_000]);
    assert.deepEqual(handler.renewals[0]?.call, { clientId: "w1/Admitter/0", throttlerIds: ["tasks"] });
    tasks.release(1);
    await clock.advance(5_000);
    assert.equal(handler.renewals.length, 3);
    factory.close();
  });

  it("gives every held unit back when the job closes, and keeps its client across a reconfiguration of the same kind", async () => {
    const { handler, factory, tasks } = setup();
    await tasks.throttle(4);
    factory.reconfigure(dynamicSpec({ throttlers: { tasks: { kind: "concurrency", limit: 20, lease_timeout: "5s" } } }));
    assert.equal(handler.releases.length, 0, "a reconfiguration does not hand back units in flight");
    tasks.release(1);
    factory.close();
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(handler.releases.map((r) => r.amount), [1, 3]);
  });
});
