// What a failover leader persists and restores, and how a failed write shows (docs/design.md §5.3), in
// virtual time with the in-memory stand-ins; test/controller-state-fencing.test.ts runs the store on a broker.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError } from "@sluice/core";
import type { CallContext, RequestQuotaCall } from "@sluice/protocol";
import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { startControllerStatusServer, writeControllerMetrics } from "../src/index.ts";
import { PrometheusText } from "@sluice/status-http";
import type { PersistedThrottler } from "@sluice/failover-ports";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const T0 = 1_700_000_000_000;
const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const call = (throttlerId: string, amount: number, requestId: string): RequestQuotaCall => ({
  throttlerId,
  clientId: "c",
  amount,
  timestampMs: 0,
  quotaClassId: "",
  requestId,
});

function spec(throttlers: Record<string, unknown>): DynamicSpec {
  const parsed = validateDynamicSpec({ throttlers });
  assert.ok(parsed.ok, JSON.stringify(parsed));
  return parsed.value;
}

async function refusal(promise: Promise<unknown>): Promise<SluiceError> {
  const error = await promise.then(
    () => assert.fail("expected a refusal"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof SluiceError, String(error));
  return error;
}

/** Puts records in the store as a predecessor would have written them. */
function persist(store: MemoryStore, ...records: PersistedThrottler[]): void {
  store.state = { ...store.state, throttlers: new Map(records.map((r) => [r.throttlerId, r])) };
}

describe("failover state: restore, bounds of writes, loud failures", () => {
  it("an adaptive throttler's successor accrues the downtime at the persisted limit, not initial_limit, and does not start full", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore();
    const adaptive = { load: { module: "./load.ts" }, target: { low: 0.5, high: 0.8 }, initial_limit: 100, min_limit: 1, max_limit: 200, interval: "1s" };
    // The loop had cut the limit to 5/s and the bucket was 40 in debt; the failover took 7 s.
    persist(store, {
      throttlerId: "api",
      balance: { balance: -40, atMs: T0 },
      limitPerSecond: 5,
      adaptive: { limitInForce: 5, law: { limit: 5, failures: 0, raisedLast: false }, decidedAtMs: T0 },
      generation: 1,
      writtenAtMs: T0,
    });
    await clock.advance(7_000);
    const member = await startStandInMember({
      store,
      clock,
      address: "127.0.0.1:7002",
      dynamicSpec: spec({ api: { period: "10s", adaptive } }),
      loadSourceOf: () => ({ description: "the test", read: async () => ({ ok: true, load: 0.9 }) }),
    });
    await member.lead(2);
    const api = member.throttler("api");
    assert.equal(api.limit, 5, "goes on at the persisted limit");
    assert.ok(api.balance !== null && Math.abs(api.balance - -5) < 1e-6, `-40 + 7 s × 5/s = -5, got ${api.balance} (capacity ${api.capacity})`);
    await member.controller.close();
  });

  it("claims the writer before it reads, rewrites every record under its claim, then only the throttlers that changed", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore();
    const many: Record<string, unknown> = {};
    for (let i = 0; i < 1_000; i++) many[`t${i}`] = { limit: 10, period: "1s" };
    persist(store, { throttlerId: "gone", balance: { balance: 1, atMs: T0 }, limitPerSecond: 1, generation: 1, writtenAtMs: T0 });
    const member = await startStandInMember({ store, clock, address: "127.0.0.1:7001", dynamicSpec: spec(many) });
    await member.lead(1);
    assert.deepEqual(store.calls, ["claim", "catchUp"]);
    const first = store.writes.find((w) => w.throttlers);
    assert.equal(first?.throttlers?.length, 1_000, "one record per throttler");
    assert.deepEqual(first?.removedThrottlers, ["gone"], "a throttler no longer declared loses its record");
    const before = store.writes.length;
    await clock.advance(500);
    await member.controller.requestQuota(call("t7", 3, "r1"), context());
    const after = store.writes.slice(before).filter((w) => w.throttlers);
    assert.deepEqual(
      after.flatMap((w) => w.throttlers?.map((r) => r.throttlerId) ?? []),
      ["t7"],
      "the other 999 accrue exactly as persisted",
    );
    assert.equal(store.throttler("t7")?.balance?.balance, 7);
    await member.controller.close();
  });

  it("a failed write is logged, counted in sluice_controller_state_write_errors_total and answers /healthz with 503 until a write succeeds", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore();
    const member = await startStandInMember({ store, clock, address: "127.0.0.1:7001", dynamicSpec: spec({ rows: { limit: 10, period: "10s" } }) });
    await member.lead(1);
    const http = await startControllerStatusServer({ controller: member.controller, port: 0 });
    try {
      store.failWith = new Error("MESSAGE_TOO_LARGE: the broker refused the batch");
      const refused = await refusal(member.controller.requestQuota(call("rows", 1, "a"), context()));
      assert.equal(refused.code, "CONTROLLER_UNAVAILABLE");
      assert.match(refused.message, /could not be persisted .*MESSAGE_TOO_LARGE/);
      await refusal(member.controller.requestQuota(call("rows", 1, "b"), context()));
      assert.equal(member.controller.status().stateWriteErrors, 2);
      assert.match(member.lines.join("\n"), /writing the records of 1 throttler\(s\) to "p.controller-state" failed \(MESSAGE_TOO_LARGE.*1 failed write/);
      const out = new PrometheusText();
      writeControllerMetrics(out, member.controller.snapshot());
      assert.match(await out.render(), /^sluice_controller_state_write_errors_total 2$/m);
      const unhealthy = await fetch(`${http.url}healthz`);
      assert.equal(unhealthy.status, 503);
      assert.match(await unhealthy.text(), /unhealthy: the leader cannot write its state .*MESSAGE_TOO_LARGE/);

      store.failWith = null;
      assert.equal((await member.controller.requestQuota(call("rows", 1, "c"), context())).granted, 1);
      assert.equal(member.controller.status().stateWriteFailure, null);
      assert.equal((await fetch(`${http.url}healthz`)).status, 200);
    } finally {
      await http.close();
      await member.controller.close();
    }
  });

  it("a leader whose writer Kafka fenced steps down at once, loudly, and grants nothing more", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore();
    const member = await startStandInMember({ store, clock, address: "127.0.0.1:7001", dynamicSpec: spec({ rows: { limit: 10, period: "10s" } }) });
    await member.lead(1);
    store.fenceNext = true;
    assert.equal((await refusal(member.controller.requestQuota(call("rows", 1, "a"), context()))).code, "CONTROLLER_UNAVAILABLE");
    assert.equal(member.controller.status().role, "fenced");
    assert.match(member.lines.join("\n"), /LOST THE LEADERSHIP: .*fenced.*; another controller claimed the state writer/);
    assert.equal((await refusal(member.controller.requestQuota(call("rows", 1, "b"), context()))).code, "CONTROLLER_UNAVAILABLE");
    await member.controller.close();
  });
});
