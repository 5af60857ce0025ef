// The failover state machine in virtual time (docs/design.md §5.2), with in-memory stand-ins for the two
// ports: the election is driven by the test, the store keeps records in memory and can be made to
// hang. The Kafka implementations are exercised by test/controller-*.test.ts on the real broker.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError } from "@sluice/core";
import type { CallContext, RequestQuotaCall } from "@sluice/protocol";
import { dynamicSpecSchema } from "@sluice/spec";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const SPEC = dynamicSpecSchema.parse({ throttlers: { rows: { limit: 10, period: "10s" } } });
const LEASE_MS = 3_000;

function context(): CallContext {
  return { deadlineAt: null, signal: new AbortController().signal, metadata: {} };
}

function call(amount: number, requestId: string): RequestQuotaCall {
  return { throttlerId: "rows", clientId: "c", amount, timestampMs: 0, quotaClassId: "", requestId };
}

async function setup(store = new MemoryStore()) {
  const clock = new ManualClock(1_000_000);
  const member = await startStandInMember({ store, clock, address: "127.0.0.1:7001", dynamicSpec: SPEC, leaseMs: LEASE_MS });
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  const lead = (generation = 1) => member.lead(generation);
  return { clock, election: member.election, store, controller: member.controller, lines: member.lines, settle, lead };
}

async function refusal(promise: Promise<unknown>): Promise<SluiceError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof SluiceError, `expected a SluiceError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected a refusal");
}

describe("FailoverController", () => {
  it("refuses every call before an election, and as a follower names the leader it read", async () => {
    const { controller, election, store, clock } = await setup();
    const before = await refusal(controller.requestQuota(call(1, "a"), context()));
    assert.equal(before.code, "CONTROLLER_UNAVAILABLE");
    assert.match(before.message, /no leader is known yet/);

    store.state = { ...store.state, leader: { address: "127.0.0.1:7002", memberId: "x", generation: 4, sinceMs: clock.now() } };
    election.elect(4, false, clock.now());
    const follower = await refusal(controller.requestQuota(call(1, "b"), context()));
    assert.equal(follower.code, "CONTROLLER_UNAVAILABLE");
    assert.equal((follower.details as { leader?: string }).leader, "127.0.0.1:7002");
    assert.match(follower.message, /follower .* the leader is 127\.0\.0\.1:7002/);
    assert.equal(controller.status().role, "follower");
    assert.equal(controller.status().leader, "127.0.0.1:7002");
  });

  it("takes over from the persisted state: version continues, balances are restored, not full", async () => {
    const store = new MemoryStore();
    const clock0 = 1_000_000;
    store.state = {
      spec: { version: 7, dynamicSpecJson: JSON.stringify({ throttlers: { rows: { limit: 20, period: "10s" } } }), generation: 2, writtenAtMs: clock0 - 5_000 },
      throttlers: new Map([
        ["rows", { throttlerId: "rows", balance: { balance: 0, atMs: clock0 - 2_000 }, limitPerSecond: 20, generation: 2, writtenAtMs: clock0 - 2_000 }],
      ]),
      keys: new Map(),
      leader: null,
    };
    const { controller, lead } = await setup(store);
    await lead(3);
    const snapshot = controller.snapshot();
    assert.equal(snapshot.version, 7);
    assert.equal(snapshot.throttlers[0]?.limit, 20);
    assert.equal(snapshot.throttlers[0]?.balance, 40); // 0 two seconds ago at 20/s, not the capacity 200
    assert.equal(store.state.leader?.address, "127.0.0.1:7001");
    assert.equal(store.state.leader?.generation, 3);
    assert.equal(snapshot.failover?.leaderships, 1);
  });

  it("answers a grant only after the balance after it is persisted", async () => {
    const { controller, store, lead, settle } = await setup();
    await lead();
    let release!: () => void;
    store.hold = new Promise<void>((resolve) => (release = resolve));
    let answered = false;
    const grant = controller.requestQuota(call(30, "g1"), context()).then((g) => {
      answered = true;
      return g;
    });
    for (let i = 0; i < 5; i++) await settle();
    assert.equal(answered, false, "not answered while the state write is pending");
    store.hold = null;
    release();
    assert.equal((await grant).granted, 30);
    const last = store.throttlerWrites("rows").at(-1);
    assert.equal(last?.balance?.balance, 70, "the persisted balance already counts the grant");
  });

  it("fences itself when its lease is not renewed (a paused leader): grants nothing more, fails its waiters", async () => {
    const { controller, election, clock, store, lead, settle, lines } = await setup();
    await lead(1);
    // Overdraw (pay-after: 150 at a balance of 100 leaves a debt of 50), then queue a request that
    // would be granted after 5 s of refill.
    await controller.requestQuota(call(150, "drain"), context());
    const queued = controller.requestQuota(call(20, "q1"), context());
    queued.catch(() => {}); // awaited below, after it has been refused
    // Heartbeats renew the lease for a while…
    await clock.advance(1_000);
    election.listener?.onConfirmed(1, clock.now());
    assert.ok(controller.status().leaseRemainingMs! > 2_000);
    const writesBefore = store.writes.length;
    // …then stop (SIGSTOP, or cut off from Kafka): the lease ends 3 s after the last confirmation.
    await clock.advance(LEASE_MS);
    await settle();
    const error = await refusal(queued);
    assert.equal(error.code, "CONTROLLER_UNAVAILABLE");
    assert.match(error.message, /stopped leading pipeline "p" \(the lease of generation 1 lapsed/);
    assert.equal(controller.status().role, "fenced");
    assert.match(lines.join("\n"), /stepped down: the lease of generation 1 lapsed/);
    const later = await refusal(controller.requestQuota(call(1, "after"), context()));
    assert.equal(later.code, "CONTROLLER_UNAVAILABLE");
    assert.equal(store.writes.length, writesBefore, "a fenced leader writes no state");
    assert.equal(election.listener?.claim(), null, "and no longer claims the leadership in a rejoin");
  });

  it("a confirmation sent before a pause does not renew the lease past its send time", async () => {
    const { controller, election, clock, lead } = await setup();
    await lead(1);
    const sentAt = clock.now() + 500;
    await clock.advance(5_000); // paused while the heartbeat's answer was on its way
    election.listener?.onConfirmed(1, sentAt);
    const error = await refusal(controller.requestQuota(call(1, "x"), context()));
    assert.equal(error.code, "CONTROLLER_UNAVAILABLE");
  });

  it("close() fails its waiters, and the membership ending afterwards does not make it a follower again", async () => {
    const { controller, election, lead } = await setup();
    await lead(2);
    await controller.requestQuota(call(200, "overdraw"), context());
    const waiting = controller.requestQuota(call(1, "w"), context()).catch((e: unknown) => e);
    await controller.close();
    election.listener?.onLost("the group consumer stopped");
    assert.equal(controller.status().role, "closed");
    assert.equal(((await waiting) as SluiceError).code, "CONTROLLER_UNAVAILABLE");
    assert.match(((await refusal(controller.requestQuota(call(1, "late"), context()))) as SluiceError).message, /shutting down/);
  });

  it("while its membership is lost, refuses with when and why it ended, until an election reports again", async () => {
    const { controller, election, clock, lead } = await setup();
    await lead(2);
    election.listener?.onLost("the group consumer stopped");
    await clock.advance(40_000);
    election.listener?.onLost("the group consumer crashed: Failed to find group coordinator; a new consumer joins the group");
    await clock.advance(50_000);
    const lost = await refusal(controller.requestQuota(call(1, "lost"), context()));
    assert.equal(lost.code, "CONTROLLER_UNAVAILABLE");
    // Since the first loss, with the latest cause.
    assert.match(
      lost.message,
      /no leader is known yet: its group membership ended 90\.0 s ago \(the group consumer crashed: Failed to find group coordinator; a new consumer joins/,
    );
    await lead(4);
    election.listener?.onLost("the group consumer stopped");
    assert.match((await refusal(controller.requestQuota(call(1, "again"), context()))).message, /ended 0\.0 s ago \(the group consumer stopped\)/);
  });

  it("steps down when a new election names another member, and claims its generation while leading", async () => {
    const { controller, election, clock, lead } = await setup();
    await lead(5);
    assert.deepEqual(election.listener?.claim(), { generation: 5 });
    await controller.requestQuota(call(1_000, "overdraw"), context());
    const waiting = controller.requestQuota(call(1, "small"), context()).catch((e: unknown) => e);
    election.elect(6, false, clock.now());
    assert.equal(controller.status().role, "follower");
    assert.equal(election.listener?.claim(), null);
    const error = (await waiting) as SluiceError;
    assert.equal(error.code, "CONTROLLER_UNAVAILABLE");
  });
});
