import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HashedGrantTable } from "../src/hashed-grant-table.ts";
import { seededRandom } from "./seeded-random.ts";

interface ModelGrant {
  readonly key: string;
  readonly amount: number;
  readonly expiresAt: number;
}

/** What the table must answer: the latest grant per hash, dropped in push order. */
class Model {
  readonly ring: ModelGrant[] = [];
  readonly latest = new Map<string, ModelGrant>();
  push(grant: ModelGrant): void {
    this.ring.push(grant);
    this.latest.set(grant.key, grant);
  }
  dropOldest(): boolean {
    const grant = this.ring.shift();
    if (!grant || this.latest.get(grant.key) !== grant) return false;
    this.latest.delete(grant.key);
    return true;
  }
}

describe("HashedGrantTable", () => {
  it("finds what was pushed, forgets in push order, and reads back amounts, waits, expiries and slots", () => {
    const table = new HashedGrantTable();
    table.push(1, 2, 5, 7, 100, NaN, NaN);
    table.push(3, 4, 6, 8, 200, 150, 12.5);
    assert.equal(table.size, 2);
    assert.deepEqual(table.find(1, 2), { amount: 5, waitedMs: 7, expiresAt: 100, paceStartAt: NaN, paceIntervalMs: NaN });
    assert.deepEqual(table.find(3, 4), { amount: 6, waitedMs: 8, expiresAt: 200, paceStartAt: 150, paceIntervalMs: 12.5 });
    assert.equal(table.find(1, 4), undefined, "both halves must match");
    assert.equal(table.find(3, 2), undefined);
    assert.equal(table.oldestExpiresAt, 100);
    assert.equal(table.dropOldest(), true);
    assert.equal(table.find(1, 2), undefined);
    assert.equal(table.oldestExpiresAt, 200);
    assert.equal(table.dropOldest(), true);
    assert.equal(table.oldestExpiresAt, Infinity);
    assert.equal(table.dropOldest(), false, "nothing to drop");
    assert.equal(table.size, 0);
  });

  it("keeps a superseded grant in the ring without counting it as a hash forgotten", () => {
    const table = new HashedGrantTable();
    table.push(9, 9, 1, 0, 10, NaN, NaN);
    table.push(9, 9, 1, 3, 20, NaN, NaN);
    assert.equal(table.size, 1);
    assert.equal(table.slotsInUse, 2);
    assert.equal(table.find(9, 9)?.waitedMs, 3, "the latest grant answers");
    assert.equal(table.dropOldest(), false, "the head was superseded");
    assert.equal(table.find(9, 9)?.waitedMs, 3);
    assert.equal(table.dropOldest(), true);
    assert.equal(table.find(9, 9), undefined);
  });

  for (const [name, lowRange, steps] of [
    ["spread hashes", 2 ** 32, 60_000],
    ["every low half within 8 values (long probe runs, backward shifts across the wrap)", 8, 12_000],
  ] as const) {
    it(`agrees with a model over ${steps} random pushes, drops and shrinks: ${name}`, () => {
      const next = seededRandom(lowRange === 8 ? 7 : 11);
      const table = new HashedGrantTable();
      const model = new Model();
      let now = 0;
      let peakBytes = 0;
      for (let step = 0; step < steps; step += 1) {
        const phase = Math.floor(step / (steps / 6)) % 2; // grow for a while, then drain: growth and shrinking both run
        const r = next();
        if (r < (phase === 0 ? 0.7 : 0.3)) {
          // A few hundred high halves: pushes repeat hashes (superseding) as well as add new ones.
          const high = Math.floor(next() * 3_000);
          const low = Math.floor(next() * lowRange) >>> 0;
          now += 1;
          const grant = { key: `${high}:${low}`, amount: Math.floor(next() * 100), expiresAt: now };
          model.push(grant);
          table.push(high, low, grant.amount, step, grant.expiresAt, step % 3 === 0 ? step : NaN, 2);
        } else {
          assert.equal(table.dropOldest(), model.dropOldest(), `drop at step ${step}`);
          if (r > 0.95) table.shrinkIfSparse();
        }
        peakBytes = Math.max(peakBytes, table.bytes);
        assert.equal(table.size, model.latest.size, `size at step ${step}`);
        assert.equal(table.slotsInUse, model.ring.length);
        if (step % 97 === 0) {
          for (const [key, grant] of model.latest) {
            const [high, low] = key.split(":").map(Number) as [number, number];
            assert.equal(table.find(high, low)?.amount, grant.amount, `find ${key} at step ${step}`);
          }
          assert.equal(table.oldestExpiresAt, model.ring[0]?.expiresAt ?? Infinity);
        }
      }
      while (model.ring.length > 0) assert.equal(table.dropOldest(), model.dropOldest());
      table.shrinkIfSparse();
      assert.equal(table.size, 0);
      assert.ok(table.bytes < peakBytes, `shrank after draining: ${table.bytes} B < peak ${peakBytes} B`);
    });
  }

  it("adds the slot arrays only once a paced grant arrives, and reads earlier grants as unpaced", () => {
    const table = new HashedGrantTable();
    table.push(1, 1, 1, 0, 1, NaN, NaN);
    const unpaced = table.bytes;
    table.push(2, 2, 1, 0, 2, 40, 5);
    assert.ok(table.bytes > unpaced);
    assert.ok(Number.isNaN(table.find(1, 1)?.paceStartAt));
    assert.equal(table.find(2, 2)?.paceStartAt, 40);
  });

  it("holds a million grants in about 50 bytes each of typed arrays", () => {
    const table = new HashedGrantTable();
    for (let i = 0; i < 1_000_000; i += 1) table.push(Math.imul(i, 0x9e3779b1) >>> 0, i, 1, 0, i, NaN, NaN);
    assert.equal(table.size, 1_000_000);
    assert.equal(table.find(Math.imul(123_456, 0x9e3779b1) >>> 0, 123_456)?.expiresAt, 123_456);
    // 2^20 ring slots × (8 B of hash + 24 B of grant + 16 B of index: two slots of ring slot and low half).
    assert.equal(table.bytes, 2 ** 20 * 48);
  });
});
