// A keyed concurrency throttler's held units through failovers (docs/design.md §11.4, §5.3), in virtual
// time with the in-memory stand-ins, records through JSON as through the topic: each key with units
// held has a record `bucket/<throttler id>/<key>` with its holders (and their silences), so the
// successor starts every such key with its units in use — held ≤ limit per key holds across the
// failover — keeps them while their holders renew, gives a silent holder's back after lease_timeout
// of serving time however many takeovers come in between, and answers a replayed request id from
// the restored lease instead of leasing its units twice.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { PERSISTED_HOLDERS_MAX, STATE_RECORD_MAX_BYTES, UNLISTED_HOLDER } from "@sluice/failover-ports";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";
import { persistedThrottlers } from "../src/failover/persisted-throttlers.ts";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const LEASE_MS = 3_000;
const jsonCodec = <T>(record: T): T => JSON.parse(JSON.stringify(record)) as T;
const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });

function specOf() {
  const parsed = validateDynamicSpec({ throttlers: { api: { kind: "concurrency", limit: 2, lease_timeout: `${LEASE_MS}ms`, keyed: {} } } });
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  return parsed.value;
}

async function member(store: MemoryStore, clock: ManualClock, index: number, leaseMs?: number) {
  const started = await startStandInMember({ store, clock, address: `127.0.0.1:${7400 + index}`, dynamicSpec: specOf(), ...(leaseMs ? { leaseMs } : {}) });
  const ask = (key: string, clientId: string, amount: number, requestId = "") =>
    started.controller.requestQuota({ throttlerId: "api", clientId, amount, timestampMs: 0, quotaClassId: "", requestId, key }, context());
  const renew = (clientId: string) => started.controller.renewLeases({ clientId, throttlerIds: ["api"] }, context());
  const release = (key: string, clientId: string, amount: number) =>
    started.controller.releaseQuota({ throttlerId: "api", clientId, amount, quotaClassId: "", key }, context());
  return { ...started, ask, renew, release };
}

/** Whether `promise` settled by now (after the turns of the event loop a grant takes). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  return done;
}

const heldByKey = (store: MemoryStore) =>
  Object.fromEntries([...(store.state.keys.get("api") ?? [])].map(([key, r]) => [key, r.leases ? Object.keys(r.leases.holders).sort() : null]));

describe("keyed concurrency throttler through a failover (virtual time)", () => {
  it("the successor starts each key with its held units in use; renewed holders keep them, a silent one loses them", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const store = new MemoryStore(jsonCodec);
    const first = await member(store, clock, 0);
    await first.lead(1);
    assert.equal((await first.ask("a", "c1", 2, "a-1")).granted, 2); // key a full
    assert.equal((await first.ask("b", "c2", 1, "b-1")).granted, 1); // key b: 1 of 2
    assert.deepEqual(heldByKey(store), { a: ["c1"], b: ["c2"] }, "one record per key with units held, naming its holders");
    const aRecord = store.state.keys.get("api")?.get("a");
    assert.deepEqual(aRecord?.leases?.holders, { c1: { default: 2 } });
    assert.ok(JSON.stringify(aRecord).length < STATE_RECORD_MAX_BYTES);
    await first.controller.close(); // the leader dies without a word

    await clock.advance(2_000); // nobody leads: no holder could renew, so this time does not count
    const second = await member(store, clock, 1);
    await second.lead(2);
    assert.ok(
      second.lines.some((line) => /units still held by their holders: api \(2 keys\)=3/.test(line)),
      second.lines.join("\n"),
    );
    // Held ≤ limit per key: key a is full on the successor, key b has one unit free.
    const third = second.ask("a", "c3", 1, "c3-1");
    assert.equal(await settled(third), false, "key a's units are still in use: a new holder waits");
    assert.equal((await second.ask("b", "c3", 1, "c3-2")).granted, 1, "key b had one unit free");
    const fourth = second.ask("b", "c4", 1, "c4-1");
    assert.equal(await settled(fourth), false, "key b is full now");
    // A replay of c1's grant (its answer was lost in the failover) is answered from the restored lease.
    assert.equal((await second.ask("a", "c1", 2, "a-1")).granted, 2);
    assert.equal(await settled(third), false, "the replay leased nothing more");

    // c1 renews with the successor; c2 never does: its unit of key b comes back after lease_timeout.
    for (let t = 0; t < LEASE_MS + 1_000; t += 500) {
      await clock.advance(500);
      assert.equal((await second.renew("c1")).held, 2, "c1's renewal counts its restored units");
    }
    assert.equal(await settled(fourth), true, "c2 stopped renewing: its unit of key b came back and went to c4");
    assert.equal(await settled(third), false, "c1 renewed: key a is still full");
    await second.release("a", "c1", 1);
    assert.equal((await third).granted, 1, "c1 gave a unit of key a back: c3 has it");
    // c3 never renewed its unit of key b either: that lease ended too.
    assert.deepEqual(heldByKey(store), { a: ["c1", "c3"], b: ["c4"] }, "each key's record follows its holders");
    await second.controller.close();
  });

  it("a key's units whose holder never renews come back after lease_timeout of serving time, though every leadership is shorter", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const store = new MemoryStore(jsonCodec);
    let current = await member(store, clock, 0);
    await current.lead(1);
    await current.ask("a", "gone", 2, "g-1");
    await clock.advance(1_000);
    // Five leaderships of 1 s each: 1 s + 5 s of serving time without a word, past lease_timeout (3 s).
    for (let i = 0; i < 5; i++) {
      await current.controller.close();
      await clock.advance(5_000);
      current = await member(store, clock, i + 1);
      await current.lead(i + 2);
      await clock.advance(1_000);
    }
    assert.equal((await current.ask("a", "new", 2, "n-1")).granted, 2, `the silent holder's units of key a came back; log:\n${current.lines.join("\n")}`);
    assert.deepEqual(heldByKey(store), { a: ["new"] });
    await current.controller.close();
  });

  it("a key's record is deleted once nothing of it is held and its request ids are forgotten", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const store = new MemoryStore(jsonCodec);
    const first = await member(store, clock, 0, 600_000); // leads for longer than the bucket remembers request ids
    await first.lead(1);
    await first.ask("a", "c1", 1, "a-1");
    await first.release("a", "c1", 1);
    await first.ask("b", "c1", 1);
    // The bucket remembers granted request ids for detachedGraceMs; then a's record goes.
    await clock.advance(120_000);
    await first.renew("c1");
    await first.ask("b", "c1", 1);
    assert.deepEqual(Object.keys(heldByKey(store)), ["b"]);
    assert.ok(
      store.writes.some((w) => (w.removedKeys ?? []).some((k) => k.throttlerId === "api" && k.key === "a")),
      "a tombstone for key a",
    );
    await first.controller.close();
  });

  it("a key's record keeps within the bounds of a throttler's: past PERSISTED_HOLDERS_MAX holders the rest are summed", async () => {
    const holders = PERSISTED_HOLDERS_MAX + 500;
    const parsed = validateDynamicSpec({ throttlers: { api: { kind: "concurrency", limit: holders, keyed: {} } } });
    assert.ok(parsed.ok);
    const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock: new ManualClock(1_700_000_000_000) });
    for (let i = 0; i < holders; i++) {
      await controller.requestQuota(
        { throttlerId: "api", clientId: `holder-${i}`, amount: 1, timestampMs: 0, quotaClassId: "", requestId: `r-${i}`, key: "busy" },
        context(),
      );
    }
    const records = [...persistedThrottlers(controller, 1, 1_700_000_000_000).values()].map((r) => r.record).filter((r) => r.key !== undefined);
    assert.deepEqual(
      records.map((r) => r.key),
      ["busy"],
      "one record for the key",
    );
    const leases = records[0]?.leases;
    assert.ok(leases);
    assert.equal(Object.keys(leases.holders).length, PERSISTED_HOLDERS_MAX, "the largest holders by name, one stand-in for the rest");
    const units = Object.values(leases.holders).reduce((sum, byClass) => sum + Object.values(byClass).reduce((a, b) => a + b, 0), 0);
    assert.equal(units, holders, "no unit is dropped: the unlisted holders' are summed");
    assert.ok(Object.hasOwn(leases.holders, UNLISTED_HOLDER));
    const bytes = Buffer.byteLength(JSON.stringify(records[0]));
    assert.ok(bytes < STATE_RECORD_MAX_BYTES, `${bytes} bytes`);
    controller.close();
  });
});
