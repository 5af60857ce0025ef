// Request ids on a concurrency throttler (docs/design.md §11.2), in virtual time: a request retried with the
// same id (a client retry after a lost answer, a failover replay) gets the same grant back and never
// takes the units twice, whether it comes after the answer or joins the original while it waits.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { createGrpcQuotaClient, type CallContext } from "@sluice/protocol";
import { validateDynamicSpec, validatePipelineSpec } from "@sluice/spec";
import { Controller, startController, type ControllerSnapshot } from "../src/index.ts";

const GRACE_MS = 5_000;

function setup(throttler: Record<string, unknown>) {
  const clock = new ManualClock(1_700_000_000_000);
  const parsed = validateDynamicSpec({ throttlers: { tasks: { kind: "concurrency", ...throttler } } });
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock, detachedGraceMs: GRACE_MS });
  const tasks = () => {
    const t = controller.snapshot().throttlers.find((x) => x.id === "tasks");
    assert.ok(t);
    return t;
  };
  return { clock, controller, tasks };
}

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const ask = (controller: Controller, clientId: string, amount: number, requestId: string) =>
  controller.requestQuota({ throttlerId: "tasks", clientId, amount, timestampMs: 0, quotaClassId: "", requestId }, context());
const release = (controller: Controller, clientId: string, amount: number) =>
  controller.releaseQuota({ throttlerId: "tasks", clientId, amount, quotaClassId: "" }, context());
const renew = (controller: Controller, clientId: string) => controller.renewLeases({ clientId, throttlerIds: ["tasks"] }, context());

describe("replayed request ids on a concurrency throttler (virtual time)", () => {
  it("a replay after the answer gets the same grant and no second lease; the holder's release frees exactly its units", async () => {
    const { clock, controller, tasks } = setup({ limit: 3, lease_timeout: "2s" });
    const first = await ask(controller, "a", 2, "a-1");
    const replay = await ask(controller, "a", 2, "a-1");
    assert.equal(first.granted, 2);
    assert.equal(replay.granted, 2, "the replay is answered with the grant");
    assert.equal(tasks().inUse, 2);
    assert.equal(tasks().concurrency?.heldUnits, 2, "one lease of 2 units, not 4");
    await ask(controller, "b", 1, "b-1");
    await release(controller, "a", 2);
    assert.equal(tasks().concurrency?.holders, 1);
    // "a" is gone; "b" renews. Had the replay been leased, "a"'s leftover 2-unit lease would end now
    // and free 2 units of a bucket in which only b's 1 is in use: the next two callers would run
    // beside b past the limit.
    for (let i = 0; i < 6; i++) {
      await clock.advance(500);
      await renew(controller, "b");
    }
    assert.equal(tasks().inUse, 1);
    assert.equal(tasks().concurrency?.expiredLeases, 0);
    controller.close();
  });

  it("a replay that comes after its lease ended (not renewed for lease_timeout) leases units again instead of answering from a grant nobody counts", async () => {
    const { clock, controller, tasks } = setup({ limit: 2, lease_timeout: "2s" });
    await ask(controller, "a", 2, "a-1");
    await clock.advance(2_500);
    assert.equal(tasks().inUse, 0, "the lease ended: its units are back");
    await ask(controller, "b", 1, "b-1");
    // a retries a-1 (its answer was lost long ago): only one unit is free, so it must wait.
    let granted = false;
    const retry = ask(controller, "a", 2, "a-1").then(() => (granted = true));
    await clock.advance(10);
    assert.equal(granted, false, "not answered from the ended grant: that would put 3 units in use at limit 2");
    await release(controller, "b", 1);
    await retry;
    assert.equal(tasks().inUse, 2);
    assert.equal(tasks().concurrency?.heldUnits, 2);
    // And a replay of it now is answered from the new lease.
    assert.equal((await ask(controller, "a", 2, "a-1")).granted, 2);
    assert.equal(tasks().inUse, 2);
    controller.close();
  });

  it("a retry that joins the original while it waits is granted once", async () => {
    const { controller, tasks } = setup({ limit: 2 });
    await ask(controller, "x", 2, "x-1");
    const original = ask(controller, "a", 2, "a-1");
    const retry = ask(controller, "a", 2, "a-1");
    await release(controller, "x", 2);
    assert.deepEqual(
      (await Promise.all([original, retry])).map((g) => g.granted),
      [2, 2],
    );
    assert.equal(tasks().inUse, 2);
    assert.equal(tasks().concurrency?.heldUnits, 2);
    assert.equal(tasks().concurrency?.holders, 1);
    controller.close();
  });

  it("a request that waits past its deadline is told the limit as units in use at once, and its retry resumes its place", async () => {
    const { clock, controller, tasks } = setup({ limit: 3 });
    await ask(controller, "x", 3, "x-1");
    const deadline = { deadlineAt: clock.now() + 300, signal: new AbortController().signal, metadata: {} };
    const waiting = controller.requestQuota({ throttlerId: "tasks", clientId: "a", amount: 2, timestampMs: 0, quotaClassId: "", requestId: "a-1" }, deadline);
    const refused = assert.rejects(waiting, {
      message:
        /^QUOTA_TIMEOUT: request "a-1" for 2 units \(class "default"\) waited 300 ms on throttler "tasks" \(limit 3 units in use at once, 0 requests waiting\)/,
    });
    await clock.advance(300);
    await refused;
    const retry = ask(controller, "a", 2, "a-1");
    await release(controller, "x", 3);
    assert.equal((await retry).granted, 2);
    assert.equal(tasks().concurrency?.heldUnits, 2);
    controller.close();
  });

  it("the same id for another amount is refused with both figures; after the grace an id is a new request", async () => {
    const { clock, controller, tasks } = setup({ limit: 5 });
    await ask(controller, "a", 2, "a-1");
    await assert.rejects(ask(controller, "a", 3, "a-1"), {
      message:
        'INVALID_REQUEST: request "a-1" on throttler "tasks" was sent for amount 2 and now for 3; a request id names one request (a retry sends the same amount): use a new id for a new request',
    });
    await clock.advance(GRACE_MS + 1);
    await renew(controller, "a");
    await ask(controller, "a", 2, "a-1");
    assert.equal(tasks().inUse, 4, "granted again once the grace passed, and counted as a lease");
    assert.equal(tasks().concurrency?.heldUnits, 4);
    controller.close();
  });
});

describe("replayed request ids on a concurrency throttler, over gRPC to a served controller", () => {
  it("replays after the answer, concurrent replays and a retry after a deadline each lease the units once", async () => {
    const parsed = validatePipelineSpec({
      pipeline: "replay",
      streams: {},
      computations: {},
      dynamic_spec: { throttlers: { tasks: { kind: "concurrency", limit: 3 } } },
    });
    assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
    const running = await startController({ spec: parsed.value, port: 0 });
    const client = createGrpcQuotaClient(running.address);
    try {
      const call = (clientId: string, amount: number, requestId: string) => ({
        throttlerId: "tasks",
        clientId,
        amount,
        timestampMs: 0,
        quotaClassId: "",
        requestId,
      });
      const tasks = async () => {
        const { snapshotJson } = await client.describeThrottlers({ deadlineAt: Date.now() + 5_000 });
        const t = (JSON.parse(snapshotJson) as ControllerSnapshot).throttlers.find((x) => x.id === "tasks");
        assert.ok(t);
        return { inUse: t.inUse, held: t.concurrency?.heldUnits, holders: t.concurrency?.holders };
      };
      const within = () => ({ deadlineAt: Date.now() + 5_000 });
      await client.requestQuota(call("x", 2, "x-1"), within());
      // The answer to a-1 is "lost": the client sends it again, once and then three times at once.
      assert.equal((await client.requestQuota(call("a", 1, "a-1"), within())).granted, 1);
      assert.equal((await client.requestQuota(call("a", 1, "a-1"), within())).granted, 1);
      const again = await Promise.all([1, 2, 3].map(() => client.requestQuota(call("a", 1, "a-1"), within())));
      assert.deepEqual(
        again.map((g) => g.granted),
        [1, 1, 1],
      );
      assert.deepEqual(await tasks(), { inUse: 3, held: 3, holders: 2 });

      // a-2 waits in a full throttler until its deadline passes; the client retries it with the same id.
      await assert.rejects(client.requestQuota(call("a", 2, "a-2"), { deadlineAt: Date.now() + 300 }), /QUOTA_TIMEOUT/);
      await client.releaseQuota({ throttlerId: "tasks", clientId: "x", amount: 2, quotaClassId: "" }, within());
      const retried = await Promise.all([client.requestQuota(call("a", 2, "a-2"), within()), client.requestQuota(call("a", 2, "a-2"), within())]);
      assert.deepEqual(
        retried.map((g) => g.granted),
        [2, 2],
      );
      assert.deepEqual(await tasks(), { inUse: 3, held: 3, holders: 1 });

      await client.releaseQuota({ throttlerId: "tasks", clientId: "a", amount: 3, quotaClassId: "" }, within());
      assert.deepEqual(await tasks(), { inUse: 0, held: 0, holders: 0 });
      // Every unit came back: three new callers fit, a fourth would not.
      await Promise.all(["p", "q", "r"].map((id) => client.requestQuota(call(id, 1, `${id}-1`), within())));
      assert.deepEqual(await tasks(), { inUse: 3, held: 3, holders: 3 });
      // RenewLeases is served over gRPC (it was left out of the served service definition once).
      assert.deepEqual(await client.renewLeases?.({ clientId: "p", throttlerIds: ["tasks"] }, within()), { held: 1 });
    } finally {
      client.close();
      await running.close();
    }
  });
});
