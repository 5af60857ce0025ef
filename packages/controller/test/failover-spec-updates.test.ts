// A failover leader's reconfigurations in virtual time (docs/design.md §5.2, §5.3: a reconfiguration is
// never lost, the version in force never goes backwards): a new dynamic_spec version is committed to
// the state first, then served. The stand-in store is made to fail, hang or outlive the lease.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError } from "@sluice/core";
import type { CallContext, DynamicSpecUpdate } from "@sluice/protocol";
import { dynamicSpecSchema } from "@sluice/spec";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const SPEC = dynamicSpecSchema.parse({ throttlers: { rows: { limit: 10, period: "10s" } } });
const SPEC_20 = JSON.stringify({ throttlers: { rows: { limit: 20, period: "10s" } } });
const SPEC_30 = JSON.stringify({ throttlers: { rows: { limit: 30, period: "10s" } } });
const LEASE_MS = 3_000;

const settle = () => new Promise((resolve) => setImmediate(resolve));

async function group() {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore();
  const a = await startStandInMember({ store, clock, address: "127.0.0.1:7001", dynamicSpec: SPEC, leaseMs: LEASE_MS });
  const b = await startStandInMember({ store, clock, address: "127.0.0.1:7002", dynamicSpec: SPEC, leaseMs: LEASE_MS });
  await a.lead(1);
  /** Every version a watch on `a` was sent, in order. */
  const watched: number[] = [];
  const watching = new AbortController();
  const context: CallContext = { deadlineAt: null, signal: watching.signal, metadata: {} };
  const watch = a.controller.watchDynamicSpec("w", (update: DynamicSpecUpdate) => watched.push(update.version), context).catch(() => {});
  /** Hands the leadership from a to b (generation 2), as after a cut of a's connection. */
  const failOver = async () => {
    a.election.elect(2, false, clock.now());
    await b.lead(2);
  };
  /** The version each way `a` shows it: its snapshot, DescribeThrottlers, the limit its bucket runs at. */
  const shownBy = async (member: typeof a) => {
    const described = JSON.parse((await member.controller.describeThrottlers()).snapshotJson) as { version: number };
    return { snapshot: member.controller.snapshot().version, described: described.version, limit: member.throttler("rows").limit };
  };
  const stop = async () => {
    watching.abort();
    await watch;
    await a.controller.close();
    await b.controller.close();
  };
  return { clock, store, a, b, watched, failOver, shownBy, stop };
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

describe("failover: a reconfiguration is persisted before it is in force", () => {
  it("a spec write that fails puts nothing in force: the leader and its successor both serve the committed version", async () => {
    const { store, a, b, watched, failOver, shownBy, stop } = await group();
    assert.equal(store.state.spec?.version, 1);
    store.failWith = new Error("the broker is unreachable");
    const error = await refusal(a.controller.updateDynamicSpec(SPEC_20));
    await settle();
    assert.deepEqual(await shownBy(a), { snapshot: 1, described: 1, limit: 10 }, "the leader never served version 2");
    assert.deepEqual(watched, [1], "no watcher was sent version 2");
    assert.equal(error.code, "CONTROLLER_UNAVAILABLE");
    assert.equal(error.retriable, true);
    assert.match(
      error.message,
      /dynamic_spec version 2 could not be persisted to "p\.controller-state" \(the broker is unreachable\), so it was not put in force: version 1 stays/,
    );
    assert.deepEqual(error.details, { version: 1, refusedVersion: 2 });

    store.failWith = null;
    await failOver();
    assert.deepEqual(await shownBy(b), { snapshot: 1, described: 1, limit: 10 }, "the successor serves what the leader served");
    assert.equal(store.state.spec?.version, 1);
    await stop();
  });

  it("the same spec sent again after a failed write gets the version that failed: no version is skipped", async () => {
    const { store, a, b, watched, failOver, shownBy, stop } = await group();
    store.failWith = new Error("the broker is unreachable");
    await refusal(a.controller.updateDynamicSpec(SPEC_20));
    store.failWith = null;
    assert.deepEqual(await a.controller.updateDynamicSpec(SPEC_20), { version: 2 });
    await settle();
    assert.deepEqual(await shownBy(a), { snapshot: 2, described: 2, limit: 20 });
    assert.deepEqual(watched, [1, 2]);
    assert.equal(store.state.spec?.version, 2);
    assert.deepEqual(JSON.parse(store.state.spec?.dynamicSpecJson ?? "null").throttlers.rows.limit, 20);

    await failOver();
    assert.deepEqual(await shownBy(b), { snapshot: 2, described: 2, limit: 20 }, "the successor continues from the acknowledged version");
    await stop();
  });

  it("while the spec write is pending the old version is served; concurrent updates are persisted and applied in turn", async () => {
    const { store, a, watched, shownBy, stop } = await group();
    let release!: () => void;
    store.hold = new Promise<void>((resolve) => (release = resolve));
    const first = a.controller.updateDynamicSpec(SPEC_20);
    const second = a.controller.updateDynamicSpec(SPEC_30);
    for (let i = 0; i < 5; i++) await settle();
    assert.deepEqual(await shownBy(a), { snapshot: 1, described: 1, limit: 10 }, "version 2 is not served before it is committed");
    assert.deepEqual(watched, [1]);
    store.hold = null;
    release();
    assert.deepEqual(await first, { version: 2 });
    assert.deepEqual(await second, { version: 3 });
    await settle();
    assert.deepEqual(await shownBy(a), { snapshot: 3, described: 3, limit: 30 });
    assert.deepEqual(watched, [1, 2, 3]);
    assert.deepEqual(
      store.writes.flatMap((w) => (w.spec ? [w.spec.version] : [])),
      [1, 2, 3],
      "each version was written once, in order",
    );
    await stop();
  });

  it("a write committed after the lease lapsed is not put in force by the deposed leader, and its successor serves it", async () => {
    const { clock, store, a, b, watched, failOver, shownBy, stop } = await group();
    let release!: () => void;
    store.hold = new Promise<void>((resolve) => (release = resolve));
    const update = a.controller.updateDynamicSpec(SPEC_20);
    await settle();
    await clock.advance(LEASE_MS + 1); // no heartbeat confirmed: the lease lapses during the write
    store.hold = null;
    release();
    const error = await refusal(update);
    assert.equal(error.code, "CONTROLLER_UNAVAILABLE");
    assert.match(error.message, /dynamic_spec version 2 was persisted to "p\.controller-state", but this controller stopped leading before it put it in force/);
    assert.equal((error.details as { version?: number }).version, 2);
    assert.equal(a.controller.status().role, "fenced");
    assert.deepEqual(watched, [1], "the deposed leader never sent version 2");

    await failOver();
    assert.deepEqual(await shownBy(b), { snapshot: 2, described: 2, limit: 20 }, "the persisted reconfiguration is not lost");
    await stop();
  });
});
