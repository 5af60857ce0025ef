// A holder's silence in the lease table (docs/design.md §11.2, §5.3): the time a leader served without
// hearing from it, which a successor deducts from the holder's lease. Pure logic: every method takes `now`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LeaseTable } from "../src/quota/concurrency/lease-table.ts";

const LEASE = 3_000;
const STEP = LEASE / 10;

describe("LeaseTable silences", () => {
  it("a restored holder's lease is what is left after its silence; the silence is persisted at every step until it is heard from", () => {
    const table = new LeaseTable();
    table.grant("t", "a", "default", 2, 0, LEASE);
    table.restoredSilence("t", "a", 1_200, 0, LEASE);
    assert.deepEqual([...table.silenceToPersist("t", 0, LEASE).silentMs], [["a", 1_200]]);
    assert.equal(table.silenceToPersist("t", STEP - 1, LEASE).changed, false, "within a step: nothing to rewrite");
    const stepped = table.silenceToPersist("t", STEP, LEASE);
    assert.equal(stepped.changed, true);
    assert.deepEqual([...stepped.silentMs], [["a", 1_200 + STEP]]);
    assert.deepEqual(table.expire(LEASE - 1_200 - 1), [], "not before lease_timeout − silence");
    assert.equal(table.expire(LEASE - 1_200)[0]?.clientId, "a");
  });

  it("a renewal ends the silence (counted once, so a leader persists it before answering) and gives a full lease", () => {
    const table = new LeaseTable();
    table.grant("t", "a", "default", 1, 0, LEASE);
    table.restoredSilence("t", "a", 2_700, 0, LEASE);
    assert.equal(
      table.renew("a", ["t"], 100, () => LEASE),
      1,
    );
    assert.equal(table.silencesEnded, 1);
    const after = table.silenceToPersist("t", 100, LEASE);
    assert.equal(after.changed, true);
    assert.deepEqual([...after.silentMs], []);
    assert.deepEqual(table.expire(100 + LEASE - 1), []);
    table.renew("a", ["t"], 200, () => LEASE);
    assert.equal(table.silencesEnded, 1, "a renewal of a holder with nothing persisted changes nothing");
  });

  it("a holder heard from here has no silence persisted until it is half a lease overdue", () => {
    const table = new LeaseTable();
    table.grant("t", "a", "default", 1, 0, LEASE);
    assert.deepEqual([...table.silenceToPersist("t", LEASE / 2 - 1, LEASE).silentMs], []);
    assert.deepEqual([...table.silenceToPersist("t", LEASE / 2, LEASE).silentMs], [["a", LEASE / 2]]);
  });

  it("a restored silence of lease_timeout or more ends the lease at the next sweep; a malformed one counts as none", () => {
    const table = new LeaseTable();
    table.grant("t", "gone", "default", 1, 0, LEASE);
    table.grant("t", "odd", "default", 1, 0, LEASE);
    table.restoredSilence("t", "gone", 4_000, 0, LEASE);
    table.restoredSilence("t", "odd", Number.NaN, 0, LEASE);
    assert.deepEqual(
      table.expire(0).map((l) => l.clientId),
      ["gone"],
    );
    assert.deepEqual(table.expire(LEASE - 1), []);
  });
});
