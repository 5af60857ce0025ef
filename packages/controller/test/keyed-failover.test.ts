// A keyed throttler's keys through a failover (docs/design.md §9.1, §9.2), in virtual time with the
// in-memory stand-ins: the leader persists one record per key whose bucket is not full, deletes the
// record of a key that is full again, and a successor continues every key from its record, so a
// key in debt is still in debt. test/e2e/keyed-failover.test.ts runs it on a broker.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const T0 = 1_700_000_000_000;
/** Records go through JSON as they would through the topic. */
const jsonCodec = <T>(record: T): T => JSON.parse(JSON.stringify(record)) as T;
const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });

function specOf() {
  const parsed = validateDynamicSpec({ throttlers: { api: { limit: 1, period: "1s", keyed: {} } } });
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  return parsed.value;
}

async function member(store: MemoryStore, clock: ManualClock, index: number) {
  const started = await startStandInMember({ store, clock, address: `127.0.0.1:${7300 + index}`, dynamicSpec: specOf() });
  const ask = (key: string, amount = 1) =>
    started.controller.requestQuota({ throttlerId: "api", clientId: "c", amount, timestampMs: 0, quotaClassId: "", requestId: "", key }, context());
  return { ...started, ask };
}

const keyBalances = (store: MemoryStore) => Object.fromEntries([...(store.state.keys.get("api") ?? [])].map(([key, r]) => [key, r.balance?.balance]));

describe("keyed throttler through a failover (virtual time)", () => {
  it("a key in debt is still in debt on the successor; a full key has no record and starts full", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryStore(jsonCodec);
    const first = await member(store, clock, 0);
    await first.lead(1);
    await first.ask("debtor", 30); // 29 units owed at 1/s
    await first.ask("light"); // balance 0 of 1: not full, so it has a record
    assert.deepEqual(keyBalances(store), { debtor: -29, light: 0 });
    const written = store.writes.flatMap((w) => w.throttlers ?? []).filter((r) => r.key !== undefined);
    assert.ok(
      written.every((r) => r.throttlerId === "api" && r.limitPerSecond === 1),
      "each key's record names its throttler and its rate",
    );

    await clock.advance(2_000);
    await first.ask("other"); // a write: light is full again by now, so its record is deleted
    assert.deepEqual(keyBalances(store), { debtor: -29, other: 0 });
    assert.deepEqual(
      store.writes.flatMap((w) => w.removedKeys ?? []),
      [{ throttlerId: "api", key: "light" }],
    );
    // The leader dies: nothing more is written.
    await first.controller.close();

    await clock.advance(3_000); // the debtor's grant was 5 s ago
    const second = await member(store, clock, 1);
    await second.lead(2);
    assert.ok(
      second.lines.some((line) => /and 2 key balances of keyed throttlers persisted 3000 ms ago/.test(line)),
      second.lines.join("\n"),
    );
    assert.equal(second.throttler("api").keyed?.keys, 2, "debtor and other are remembered; light starts full");
    const light = await second.ask("light");
    assert.equal(light.waitedMs, 0, "a key without a record is served at once, as a full key would be");
    let answered = false;
    const next = second.ask("debtor").then((grant) => {
      answered = true;
      return grant;
    });
    await clock.advance(23_000);
    assert.equal(answered, false, "still in debt 28 s after the grant, on the successor");
    await clock.advance(2_000);
    const grant = await next;
    assert.ok(grant.waitedMs >= 23_000 && grant.waitedMs <= 25_000, `waited ${grant.waitedMs} ms on the successor`);
    await second.controller.close();
  });
});
