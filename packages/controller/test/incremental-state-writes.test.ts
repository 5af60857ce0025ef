// A failover leader's writes look at the keys of keyed throttlers that changed only (docs/design.md §5.3,
// src/failover/written-records.ts), and write exactly what a walk of every key writes
// (full-walk-writes.ts): two identical controllers on one ManualClock take the same seeded random
// sequence of grants, waits past their deadline, releases, leases, renewals, reconfigurations,
// parkings, forgettings, failed writes and time; one is written by the walk, the other by the
// incremental writes, and every write of the two is compared record for record. Rates are
// multiples of 1/8 unit per ms, so both compute every balance exactly alike.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { PersistedThrottler } from "@sluice/failover-ports";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";
import { restorePersistedState } from "../src/failover/restore-state.ts";
import { WrittenRecords } from "../src/failover/written-records.ts";
import { FullWalkWrites, sortedWrite } from "./full-walk-writes.ts";

const T0 = 1_700_000_000_000;
const RATE_KEYS = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11", "__proto__", "a/b"];
const LEASED_KEYS = ["m0", "m1", "m2", "m3", "m4", "constructor"];
const CLIENTS = ["w0", "w1", "w2"];

/** A small seeded generator (mulberry32): the same seed, the same sequence. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function specJson(variant: { override: boolean; leaseMs: number; period: string }): string {
  return JSON.stringify({
    throttlers: {
      per_customer: {
        limit: 125,
        period: variant.period,
        // A request of more is granted in chunks while it waits: its balance moves before it is answered.
        max_grant_amount: 16,
        keyed: { max_keys: 64, idle_timeout: "90s", ...(variant.override ? { overrides: { c1: { limit: 250 }, "a/b": { limit: 62.5 } } } : {}) },
      },
      per_model: { kind: "concurrency", limit: 3, lease_timeout: `${variant.leaseMs}ms`, keyed: { max_keys: 64, idle_timeout: "90s" } },
      plain: { limit: 125, period: "2s" },
    },
  });
}

function controllerOn(clock: ManualClock): Controller {
  const parsed = validateDynamicSpec(JSON.parse(specJson({ override: false, leaseMs: 2_000, period: "1s" })));
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  // A failover leader's Controller is told of lease changes: its lease sweep then looks at silences.
  return new Controller({ dynamicSpec: parsed.value, computations: [], clock, onLeasesChanged: () => {} });
}

const contextOf = (deadlineAt: number | null): CallContext => ({ deadlineAt, signal: new AbortController().signal, metadata: {} });

async function runSequence(seed: number, steps: number) {
  const next = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  const clock = new ManualClock(T0);
  const walked = controllerOn(clock);
  const incremental = controllerOn(clock);
  const reference = new FullWalkWrites();
  const records = new WrittenRecords();
  const pending: Promise<unknown>[] = [];
  /** The same call on both controllers, answered or not. */
  const both = (call: (c: Controller) => Promise<unknown> | undefined) => {
    for (const c of [walked, incremental]) {
      const settled = call(c);
      if (settled) pending.push(settled.catch(() => {}));
    }
  };
  const counts = { writes: 0, failedWrites: 0, keysWritten: 0, keysDeleted: 0 };
  let requestIds = 0;
  const sentIds: string[] = [];
  const write = (commit: boolean) => {
    const now = clock.now();
    const expected = reference.write(walked, 1, now, commit);
    const changes = records.changes(incremental, 1, now);
    if (commit) records.committed(changes, now);
    assert.deepEqual(sortedWrite(changes), sortedWrite(expected), `seed ${seed}: the write at +${now - T0} ms`);
    counts.writes++;
    if (!commit) counts.failedWrites++;
    counts.keysWritten += expected.throttlers.filter((r) => r.key !== undefined).length;
    counts.keysDeleted += expected.removedKeys.length;
  };

  for (let step = 0; step < steps; step++) {
    const roll = next();
    if (roll < 0.22) {
      // A grant of a rate key, now or after a wait; some with a deadline they pass (detached) and a request id retried later.
      const key = pick(RATE_KEYS);
      const amount = 1 + Math.floor(next() * 60);
      const deadlineAt = next() < 0.3 ? clock.now() + 100 + Math.floor(next() * 2_000) : null;
      const requestId = next() < 0.5 ? `r${++requestIds}` : "";
      if (requestId) sentIds.push(JSON.stringify([key, amount, requestId]));
      both((c) =>
        c.requestQuota({ throttlerId: "per_customer", clientId: "w0", amount, timestampMs: 0, quotaClassId: "", requestId, key }, contextOf(deadlineAt)),
      );
    } else if (roll < 0.27 && sentIds.length > 0) {
      const [key, amount, requestId] = JSON.parse(pick(sentIds)) as [string, number, string];
      both((c) => c.requestQuota({ throttlerId: "per_customer", clientId: "w0", amount, timestampMs: 0, quotaClassId: "", requestId, key }, contextOf(null)));
    } else if (roll < 0.32) {
      const key = pick(RATE_KEYS);
      const amount = 1 + Math.floor(next() * 10);
      both((c) => c.releaseQuota({ throttlerId: "per_customer", clientId: "w0", amount, quotaClassId: "", key }, contextOf(null)));
    } else if (roll < 0.42) {
      const key = pick(LEASED_KEYS);
      const clientId = pick(CLIENTS);
      const requestId = `m${++requestIds}`;
      both((c) => c.requestQuota({ throttlerId: "per_model", clientId, amount: 1, timestampMs: 0, quotaClassId: "", requestId, key }, contextOf(null)));
    } else if (roll < 0.47) {
      const key = pick(LEASED_KEYS);
      const clientId = pick(CLIENTS);
      both((c) => c.releaseQuota({ throttlerId: "per_model", clientId, amount: 1, quotaClassId: "", key }, contextOf(null)));
    } else if (roll < 0.52) {
      // Not every client renews: the others' leases go overdue, their silences are persisted, then they end.
      const clientId = pick(CLIENTS.slice(0, 2));
      both((c) => c.renewLeases({ clientId, throttlerIds: ["per_model"] }, contextOf(null)));
    } else if (roll < 0.56) {
      const amount = 1 + Math.floor(next() * 40);
      both((c) => c.requestQuota({ throttlerId: "plain", clientId: "w0", amount, timestampMs: 0, quotaClassId: "", requestId: "" }, contextOf(null)));
    } else if (roll < 0.58) {
      const json = specJson({ override: next() < 0.5, leaseMs: next() < 0.5 ? 2_000 : 3_000, period: next() < 0.7 ? "1s" : "2s" });
      both((c) => c.updateDynamicSpec(json));
    } else if (roll < 0.7) {
      // Mostly short steps, so that writes fall between the chunks of a waiting grant; now and then past parking and idle_timeout.
      const long = next();
      await clock.advance(long < 0.05 ? 60_000 + Math.floor(next() * 60_000) : long < 0.6 ? 1 + Math.floor(next() * 150) : 150 + Math.floor(next() * 1_500));
    } else {
      write(next() >= 0.08);
    }
    // Both controllers' calls run to where they wait before the next step.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  }
  await clock.advance(200_000);
  write(true);
  walked.close();
  incremental.close();
  await Promise.all(pending);
  return counts;
}

describe("a leader's writes look at changed keys only and write what a walk of every key writes", () => {
  for (const seed of [1, 2, 3, 4]) {
    it(`seed ${seed}: 700 random steps, every write equal to the walk's`, async () => {
      const counts = await runSequence(seed, 700);
      // The sequence exercised what it is about: keys written and deleted, and writes that failed.
      assert.ok(counts.writes > 100 && counts.failedWrites > 0, JSON.stringify(counts));
      assert.ok(counts.keysWritten > 50 && counts.keysDeleted > 20, JSON.stringify(counts));
    });
  }
});

describe("writes looking at changed keys only: the cases nothing marks", () => {
  const rateSpec = (limit: number, more: Record<string, unknown> = {}) => {
    const parsed = validateDynamicSpec({ throttlers: { api: { limit, period: "1s", ...more, keyed: {} } } });
    assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
    return parsed.value;
  };
  /** The keys' records a write writes, with their balances (the template's own record left out). */
  const keyBalances = (write: { throttlers: readonly PersistedThrottler[] }) =>
    write.throttlers
      .filter((r) => r.key !== undefined)
      .map((r) => [r.key, r.balance?.balance] as const)
      .sort();
  const ask = (c: Controller, key: string, amount: number) =>
    c.requestQuota({ throttlerId: "api", clientId: "w", amount, timestampMs: 0, quotaClassId: "", requestId: "", key }, contextOf(null));

  it("a key that refills to full by time alone has its record deleted by the next write, as the walk deletes it", async () => {
    const clock = new ManualClock(T0);
    const walked = new Controller({ dynamicSpec: rateSpec(125), computations: [], clock });
    const incremental = new Controller({ dynamicSpec: rateSpec(125), computations: [], clock });
    const reference = new FullWalkWrites();
    const records = new WrittenRecords();
    const write = () => {
      const expected = reference.write(walked, 1, clock.now());
      const changes = records.changes(incremental, 1, clock.now());
      records.committed(changes, clock.now());
      assert.deepEqual(sortedWrite(changes), sortedWrite(expected), `the write at +${clock.now() - T0} ms`);
      return changes;
    };
    for (const c of [walked, incremental]) {
      await ask(c, "debtor", 250); // 125 owed: full again 2 s later
      await ask(c, "light", 25); // 25 short: full 200 ms later
    }
    assert.deepEqual(keyBalances(write()), [
      ["debtor", -125],
      ["light", 100],
    ]);
    await clock.advance(200);
    // Nothing happened to either key since; the write is made for a grant of a third.
    for (const c of [walked, incremental]) await ask(c, "other", 1);
    const refilled = write();
    assert.deepEqual(refilled.removedKeys, [{ throttlerId: "api", key: "light" }], "light is full: its record is deleted");
    assert.ok(refilled.keysVisited <= 2, `looked at ${refilled.keysVisited} keys: the one asked for and the one due to refill`);
    await clock.advance(1_799);
    assert.deepEqual(write().removedKeys, [{ throttlerId: "api", key: "other" }], "debtor is 1 ms short of full: its record stays");
    await clock.advance(1);
    const last = write();
    assert.deepEqual(last.removedKeys, [{ throttlerId: "api", key: "debtor" }]);
    assert.equal(last.keysVisited, 1, "only the key due to refill");
    assert.equal(write().keysVisited, 0, "then nothing to look at");
    walked.close();
    incremental.close();
  });

  it("a grant taken in chunks while it waits is written between its chunks, as the walk writes it", async () => {
    const clock = new ManualClock(T0);
    const spec = rateSpec(125, { max_grant_amount: 16 });
    const walked = new Controller({ dynamicSpec: spec, computations: [], clock });
    const incremental = new Controller({ dynamicSpec: spec, computations: [], clock });
    const reference = new FullWalkWrites();
    const records = new WrittenRecords();
    for (const c of [walked, incremental]) await ask(c, "a", 125);
    const waiting = [walked, incremental].map((c) => ask(c, "a", 60));
    const balances: (number | undefined)[] = [];
    for (let step = 0; step < 12; step++) {
      const expected = reference.write(walked, 1, clock.now());
      const changes = records.changes(incremental, 1, clock.now());
      records.committed(changes, clock.now());
      assert.deepEqual(sortedWrite(changes), sortedWrite(expected), `the write at +${clock.now() - T0} ms`);
      balances.push(keyBalances(changes)[0]?.[1]);
      await clock.advance(50);
    }
    assert.deepEqual(
      (await Promise.all(waiting)).map((g) => g.granted),
      [60, 60],
    );
    // Chunks of 16 were taken while the request waited, each written once taken.
    assert.ok(balances.filter((b) => b !== undefined && b < 0).length >= 3, JSON.stringify(balances));
    walked.close();
    incremental.close();
  });

  it("a successor reading the record of a key that refilled since restores it full, not in debt", () => {
    // The record a leader wrote of a key in debt, and the leader died before the key refilled: its
    // successor restores the balance accrued at limit_per_s since at_ms, capped at the capacity.
    const clock = new ManualClock(T0 + 20_000);
    const successor = new Controller({ dynamicSpec: rateSpec(1), computations: [], clock });
    const stale = { throttlerId: "api", key: "late", balance: { balance: -5, atMs: T0 }, limitPerSecond: 1, generation: 1, writtenAtMs: T0 };
    const owing = { ...stale, key: "owing", balance: { balance: -30, atMs: T0 } };
    const keys = new Map([
      [
        "api",
        new Map([
          ["late", stale],
          ["owing", owing],
        ]),
      ],
    ]);
    restorePersistedState(successor, { throttlers: new Map(), keys }, clock.now());
    const describe = (key: string) => {
      const snapshot = JSON.parse(JSON.stringify(successor.snapshot({ throttlerId: "api", key })));
      return snapshot.throttlers[0].keyed.key;
    };
    assert.equal(describe("late").balance, 1, "-5 + 20 s × 1/s, capped at the capacity of 1: full");
    assert.equal(describe("owing").balance, -10, "-30 + 20 s × 1/s: still in debt");
    // And its first write deletes the record of the key that is full, keeps the other.
    const records = new WrittenRecords();
    records.tookOver([stale, owing]);
    const first = records.changes(successor, 2, clock.now());
    assert.deepEqual(first.removedKeys, [{ throttlerId: "api", key: "late" }]);
    assert.deepEqual(keyBalances(first), [["owing", -10]]);
    successor.close();
  });
});
