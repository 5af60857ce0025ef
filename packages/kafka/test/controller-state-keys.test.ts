// The per-key records of a keyed throttler in `<pipeline>.controller-state` (docs/design.md §9.1, §9.2):
// one record `bucket/<throttler id>/<key>` per key whose bucket is not full, its identity in the
// value, and a tombstone when the key is full again or forgotten. Pure functions and the fold, so no
// broker here; the failover tests run them on one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PersistedThrottler } from "@sluice/failover-ports";
import { ControllerStateFold } from "../src/controller-state-fold.ts";
import { decodeStateRecord, encodeThrottler, keyBucketKey, stateKeyOf } from "../src/controller-state-records.ts";

const keyRecord = (throttlerId: string, key: string, balance: number, more: Partial<PersistedThrottler> = {}): PersistedThrottler => ({
  throttlerId,
  key,
  balance: { balance, atMs: 5_000 },
  limitPerSecond: 10,
  generation: 3,
  writtenAtMs: 5_000,
  ...more,
});

describe("controller state: per-key records of keyed throttlers", () => {
  it("a key's record has a composite Kafka key and its identity in the value, and reads back whole", () => {
    const acme = keyRecord("per_customer", "acme", -42.5);
    assert.equal(stateKeyOf(acme), "bucket/per_customer/acme");
    assert.equal(keyBucketKey("per_customer", "a/b"), "bucket/per_customer/a/b");
    const value = encodeThrottler(acme);
    assert.match(value, /^\{"throttler":"per_customer","key":"acme","balance":-42\.5,"at_ms":5000,"limit_per_s":10,/);
    // Small: one key's record is the balance and its identity, nothing per holder or request id.
    assert.ok(Buffer.byteLength(value) < 160, `${Buffer.byteLength(value)} bytes: ${value}`);
    assert.deepEqual(decodeStateRecord(stateKeyOf(acme), value), { kind: "throttler", record: acme });
    // A key with "/" or any character reads back from the value, not from the Kafka key.
    const odd = keyRecord("per_customer", 'x/"y"/__proto__ ü', -1);
    assert.deepEqual(decodeStateRecord(stateKeyOf(odd), encodeThrottler(odd)), { kind: "throttler", record: odd });
    assert.deepEqual(decodeStateRecord("bucket/per_customer/acme", null), { kind: "deleted", stateKey: "bucket/per_customer/acme" });
    assert.equal(decodeStateRecord("bucket/per_customer/acme", '{"throttler":"per_customer","key":7}').kind, "unknown");
  });

  it("the fold keeps the latest record of each key by offset; a tombstone deletes one key only; a re-read converges", () => {
    const records: [string, string | null][] = [
      ["bucket/per_customer", encodeThrottler({ throttlerId: "per_customer", balance: null, limitPerSecond: null, generation: 3, writtenAtMs: 5_000 })],
      [stateKeyOf(keyRecord("per_customer", "acme", -40)), encodeThrottler(keyRecord("per_customer", "acme", -40))],
      [stateKeyOf(keyRecord("per_customer", "globex", -2)), encodeThrottler(keyRecord("per_customer", "globex", -2))],
      [stateKeyOf(keyRecord("per_customer", "acme", -41)), encodeThrottler(keyRecord("per_customer", "acme", -41, { writtenAtMs: 6_000 }))],
      [stateKeyOf(keyRecord("per_model", "acme", 1)), encodeThrottler(keyRecord("per_model", "acme", 1))],
      // globex refilled to full (or was forgotten): its record is deleted.
      [keyBucketKey("per_customer", "globex"), null],
    ];
    const fold = new ControllerStateFold();
    records.forEach(([key, value], offset) => fold.apply(offset, key, value));
    const state = fold.state();
    assert.deepEqual([...state.throttlers.keys()], ["per_customer"], "a throttler's own record is not one of its keys");
    assert.deepEqual([...(state.keys.get("per_customer")?.keys() ?? [])], ["acme"]);
    assert.equal(state.keys.get("per_customer")?.get("acme")?.balance?.balance, -41);
    assert.equal(state.keys.get("per_model")?.get("acme")?.balance?.balance, 1, "the same key of another throttler is its own record");

    // A reader that starts over from offset 0 never brings a deleted or older record back.
    records.forEach(([key, value], offset) => assert.equal(fold.apply(offset, key, value), false));
    assert.equal(fold.state(), state);

    // Deleting the throttler's own record leaves its keys' records to their own tombstones.
    fold.apply(records.length, "bucket/per_customer", null);
    assert.equal(fold.state().throttlers.size, 0);
    assert.equal(fold.state().keys.get("per_customer")?.get("acme")?.balance?.balance, -41);
    fold.apply(records.length + 1, keyBucketKey("per_customer", "acme"), null);
    assert.equal(fold.state().keys.has("per_customer"), false, "a throttler with no key left has no entry");
  });
});
