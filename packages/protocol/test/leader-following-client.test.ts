// Which controller a call of a failover group goes to (docs/design.md §5.2); pure routing logic, so the
// connections are stand-ins that answer as a leader, a follower or a dead controller would.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SluiceError } from "@sluice/core";
import { createLeaderFollowingClient, type QuotaServiceClient, type RequestQuotaCall } from "../src/index.ts";

type Behaviour = "leader" | { follower: string | null } | "dead" | "timeout";

function fakeCluster(behaviours: Record<string, Behaviour>) {
  const calls: { address: string; requestId: string }[] = [];
  const connect = (address: string): QuotaServiceClient => {
    const refuse = async (requestId: string) => {
      calls.push({ address, requestId });
      const b = behaviours[address] ?? "dead";
      if (b === "leader") return { granted: 1, waitedMs: 0 };
      if (b === "dead") throw new SluiceError("CONTROLLER_UNAVAILABLE", `the controller at ${address} is unreachable`);
      if (b === "timeout") throw new SluiceError("QUOTA_TIMEOUT", `no answer from ${address} before the deadline`);
      throw new SluiceError("CONTROLLER_UNAVAILABLE", `follower at ${address}`, b.follower ? { leader: b.follower } : {});
    };
    const unused = () => Promise.reject(new Error("not used here"));
    return {
      requestQuota: (call: RequestQuotaCall) => refuse(call.requestId),
      releaseQuota: unused,
      watchDynamicSpec: unused,
      updateDynamicSpec: unused,
      describeThrottlers: unused,
      renewLeases: async (call) => {
        await refuse(`renew:${call.clientId}`);
        return { held: 3 };
      },
      close() {},
    };
  };
  return { calls, connect };
}

const request = (requestId: string): RequestQuotaCall => ({ throttlerId: "t", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId });

describe("createLeaderFollowingClient", () => {
  it("goes straight to the leader a follower names, with the same request", async () => {
    const cluster = fakeCluster({ "h:1": { follower: "h:3" }, "h:2": { follower: "h:3" }, "h:3": "leader" });
    const client = createLeaderFollowingClient(["h:1", "h:2", "h:3"], { connect: cluster.connect });
    assert.equal((await client.requestQuota(request("r1"))).granted, 1);
    assert.deepEqual(cluster.calls, [
      { address: "h:1", requestId: "r1" },
      { address: "h:3", requestId: "r1" },
    ]);
    assert.equal(client.currentAddress, "h:3");
    await client.requestQuota(request("r2"));
    assert.equal(cluster.calls.at(-1)?.address, "h:3", "later calls go to the leader directly");
  });

  it("sends lease renewals to the leader too (a concurrency holder's units must not lapse behind a failover group)", async () => {
    const cluster = fakeCluster({ "h:1": { follower: "h:2" }, "h:2": "leader" });
    const client = createLeaderFollowingClient(["h:1", "h:2"], { connect: cluster.connect });
    assert.deepEqual(await client.renewLeases?.({ clientId: "c", throttlerIds: ["t"] }), { held: 3 });
    assert.deepEqual(cluster.calls, [
      { address: "h:1", requestId: "renew:c" },
      { address: "h:2", requestId: "renew:c" },
    ]);
  });

  it("moves past a dead controller and one that knows no leader, visiting each at most once per call", async () => {
    const behaviours: Record<string, Behaviour> = { "h:1": "dead", "h:2": { follower: null }, "h:3": "dead" };
    const cluster = fakeCluster(behaviours);
    const client = createLeaderFollowingClient(["h:1", "h:2", "h:3"], { connect: cluster.connect });
    await assert.rejects(client.requestQuota(request("r1")), (e: unknown) => e instanceof SluiceError && e.code === "CONTROLLER_UNAVAILABLE");
    assert.deepEqual(
      cluster.calls.map((c) => c.address),
      ["h:1", "h:2", "h:3"],
    );
    // The caller's retrying channel tries again (same id) once a leader is elected.
    behaviours["h:2"] = "leader";
    assert.equal((await client.requestQuota(request("r1"))).granted, 1);
    assert.deepEqual(
      cluster.calls.slice(3).map((c) => `${c.address}/${c.requestId}`),
      ["h:1/r1", "h:2/r1"],
    );
  });

  it("stays with a controller that names itself (elected, still reading its state)", async () => {
    const cluster = fakeCluster({ "h:1": { follower: "h:1" }, "h:2": "leader" });
    const client = createLeaderFollowingClient(["h:1", "h:2"], { connect: cluster.connect });
    await assert.rejects(client.requestQuota(request("r1")), (e: unknown) => e instanceof SluiceError && e.code === "CONTROLLER_UNAVAILABLE");
    assert.equal(client.currentAddress, "h:1");
    assert.deepEqual(
      cluster.calls.map((c) => c.address),
      ["h:1"],
    );
  });

  it("follows a leader the spec did not list, and leaves other errors to the caller", async () => {
    const cluster = fakeCluster({ "h:1": { follower: "h:9" }, "h:9": "leader" });
    const client = createLeaderFollowingClient(["h:1"], { connect: cluster.connect });
    await client.requestQuota(request("r1"));
    assert.equal(client.currentAddress, "h:9");

    const refusing = createLeaderFollowingClient(["a:1", "a:2"], {
      connect: () => ({ ...fakeCluster({}).connect("x"), requestQuota: () => Promise.reject(new SluiceError("QUEUE_FULL", "full")) }),
    });
    await assert.rejects(refusing.requestQuota(request("r")), (e: unknown) => e instanceof SluiceError && e.code === "QUEUE_FULL");
    assert.equal(refusing.currentAddress, "a:1");
  });

  it("moves on after a deadline only when there is another controller (a paused leader answers nothing)", async () => {
    const cluster = fakeCluster({ "h:1": "timeout", "h:2": "leader" });
    const group = createLeaderFollowingClient(["h:1", "h:2"], { connect: cluster.connect });
    assert.equal((await group.requestQuota(request("r1"))).granted, 1);
    assert.equal(group.currentAddress, "h:2");

    const single = createLeaderFollowingClient(["h:1"], { connect: fakeCluster({ "h:1": "timeout" }).connect });
    await assert.rejects(single.requestQuota(request("r2")), (e: unknown) => e instanceof SluiceError && e.code === "QUOTA_TIMEOUT");
  });
});
