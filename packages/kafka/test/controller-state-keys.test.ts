// The per-key records of a keyed throttler in `<pipeline>.controller-state` (docs/design.md §9.1, §9.2):
// one record `bucket/<throttler id>/<key>` per key whose bucket is not full, its identity in the
// value, and a tombstone when the key is full again or forgotten. Pure functions and the fold, so no
// broker here; the failover tests run them on one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PersistedThrottler } from "@sluice/failover-ports";
import { ControllerStateFold } from "../src/controller-state-fold.ts";
import { bucketKey, decodeStateRecord, encodeThrottler, keyBucketKey, parseBucketKey, stateKeyOf } from "../src/controller-state-records.ts";

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
    assert.equal(keyBucketKey("per_customer", "a/b"), "bucket/per_customer/a/b", "a key is written as it is: only the id is escaped");
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

  it("a throttler id with / or % cannot collide with a key of another throttler: the id is escaped, and reads back", () => {
    // Before ids were escaped both were "bucket/a/b": one compacted record for two, and a tombstone of either deleted both.
    const throttler: PersistedThrottler = { throttlerId: "a/b", balance: { balance: -3, atMs: 5_000 }, limitPerSecond: 1, generation: 3, writtenAtMs: 5_000 };
    const key = keyRecord("a", "b", -7);
    assert.equal(stateKeyOf(throttler), "bucket/a%2Fb");
    assert.equal(stateKeyOf(key), "bucket/a/b");
    for (const [throttlerId, k] of [
      ["a/b", undefined],
      ["a", "b"],
      ["a/b", "c/d"],
      ["100%/x", "%2F"],
      ["%2F", undefined],
      ["__proto__", "/"],
      ["plain", "ü/é"],
    ] as const) {
      const kafkaKey = k === undefined ? bucketKey(throttlerId) : keyBucketKey(throttlerId, k);
      assert.deepEqual(parseBucketKey(kafkaKey), k === undefined ? { throttlerId } : { throttlerId, key: k }, kafkaKey);
    }
    assert.equal(parseBucketKey("spec"), null);

    const fold = new ControllerStateFold();
    fold.apply(0, stateKeyOf(throttler), encodeThrottler(throttler));
    fold.apply(1, stateKeyOf(key), encodeThrottler(key));
    assert.equal(fold.state().throttlers.get("a/b")?.balance?.balance, -3);
    assert.equal(fold.state().keys.get("a")?.get("b")?.balance?.balance, -7);
    fold.apply(2, keyBucketKey("a", "b"), null); // key b of a is full again
    assert.equal(fold.state().throttlers.get("a/b")?.balance?.balance, -3, "the other throttler's record stays");
    assert.equal(fold.state().keys.has("a"), false);
  });

  it("a record written before ids were escaped is read by its value, ended by its Kafka key's next record, and deleted there once rewritten", () => {
    // What main wrote for a throttler "a/b": its record at "bucket/a/b".
    const old: PersistedThrottler = { throttlerId: "a/b", balance: { balance: -3, atMs: 5_000 }, limitPerSecond: 1, generation: 3, writtenAtMs: 5_000 };
    const fold = new ControllerStateFold();
    fold.apply(0, "bucket/a/b", encodeThrottler(old));
    assert.equal(fold.state().throttlers.get("a/b")?.balance?.balance, -3, "read by the identity in its value");
    assert.deepEqual([...fold.misplacedKeys()], [["bucket/a/b", "bucket/a%2Fb"]]);
    // A new leader rewrites it at its own key and deletes the misplaced one (what the store's write adds).
    fold.apply(1, bucketKey("a/b"), encodeThrottler({ ...old, balance: { balance: -2, atMs: 6_000 } }));
    fold.apply(2, "bucket/a/b", null);
    assert.equal(fold.state().throttlers.get("a/b")?.balance?.balance, -2, "the tombstone of the misplaced key leaves the rewritten record");
    assert.equal(fold.misplacedKeys().size, 0);

    // A tombstone main wrote at the old key deletes the record it held there.
    const before = new ControllerStateFold();
    before.apply(0, "bucket/a/b", encodeThrottler(old));
    before.apply(1, "bucket/a/b", null);
    assert.equal(before.state().throttlers.size, 0);
    // A record of key b of throttler a written later at the same Kafka key replaces the misplaced one there.
    const replaced = new ControllerStateFold();
    replaced.apply(0, "bucket/a/b", encodeThrottler(old));
    replaced.apply(1, "bucket/a/b", encodeThrottler(keyRecord("a", "b", -7)));
    assert.equal(replaced.state().throttlers.size, 0, "Kafka keeps one record per Kafka key: the old one is gone");
    assert.equal(replaced.state().keys.get("a")?.get("b")?.balance?.balance, -7);
    // Read again from offset 0, nothing changes.
    assert.equal(replaced.apply(0, "bucket/a/b", encodeThrottler(old)), false);
    assert.equal(replaced.state().keys.get("a")?.get("b")?.balance?.balance, -7);
  });

  it("a tombstone at a Kafka key leaves the record read there from another Kafka key (old records of a%2Fb and a/b)", () => {
    // Before ids were escaped, throttler "a%2Fb" wrote at "bucket/a%2Fb" and throttler "a/b" at
    // "bucket/a/b"; now "bucket/a%2Fb" is the own key of "a/b", and "a%2Fb" is at "bucket/a%252Fb".
    const record = (throttlerId: string, balance: number): PersistedThrottler => ({
      throttlerId,
      balance: { balance, atMs: 5_000 },
      limitPerSecond: 1,
      generation: 3,
      writtenAtMs: 5_000,
    });
    for (const order of [
      ["bucket/a%2Fb", "bucket/a/b"],
      ["bucket/a/b", "bucket/a%2Fb"],
    ] as const) {
      const fold = new ControllerStateFold();
      const byKafkaKey = { "bucket/a%2Fb": record("a%2Fb", -4), "bucket/a/b": record("a/b", -3) };
      let offset = 0;
      for (const kafkaKey of order) fold.apply(offset++, kafkaKey, encodeThrottler(byKafkaKey[kafkaKey]));
      assert.equal(fold.state().throttlers.get("a/b")?.balance?.balance, -3, `${order.join(", ")}: "a/b" read from bucket/a/b`);
      // A new leader rewrites "a%2Fb" at its own key and deletes the misplaced one; bucket/a/b still holds "a/b".
      fold.apply(offset++, bucketKey("a%2Fb"), encodeThrottler(record("a%2Fb", -2)));
      fold.apply(offset++, "bucket/a%2Fb", null);
      assert.equal(fold.state().throttlers.get("a/b")?.balance?.balance, -3, `${order.join(", ")}: the tombstone at bucket/a%2Fb leaves "a/b" in debt`);
      assert.equal(fold.state().throttlers.get("a%2Fb")?.balance?.balance, -2);
      assert.deepEqual([...fold.misplacedKeys()], [["bucket/a/b", "bucket/a%2Fb"]], "bucket/a/b is still to be rewritten");
      // Rewritten at its own key, then its misplaced key deleted: both records at their own keys.
      fold.apply(offset++, bucketKey("a/b"), encodeThrottler(record("a/b", -1)));
      fold.apply(offset++, "bucket/a/b", null);
      assert.equal(fold.state().throttlers.get("a/b")?.balance?.balance, -1);
      assert.equal(fold.state().throttlers.get("a%2Fb")?.balance?.balance, -2);
      assert.equal(fold.misplacedKeys().size, 0);
    }
  });

  it("offsets by Kafka key are kept only for keys that held a misplaced record; a re-read converges all the same", () => {
    const old: PersistedThrottler = { throttlerId: "a/b", balance: { balance: -3, atMs: 5_000 }, limitPerSecond: 1, generation: 3, writtenAtMs: 5_000 };
    const log: [string, string | null][] = [["bucket/a/b", encodeThrottler(old)]];
    // Key churn: records of many keys at their own Kafka keys, each full again later (a tombstone).
    for (let i = 0; i < 500; i++) log.push([keyBucketKey("per_customer", `k${i}`), encodeThrottler(keyRecord("per_customer", `k${i}`, -1))]);
    for (let i = 0; i < 500; i++) log.push([keyBucketKey("per_customer", `k${i}`), null]);
    log.push([keyBucketKey("per_customer", "stays"), encodeThrottler(keyRecord("per_customer", "stays", -5))]);
    // The misplaced record ended by a later one at its Kafka key (key b of throttler a).
    log.push(["bucket/a/b", encodeThrottler(keyRecord("a", "b", -7))]);
    const fold = new ControllerStateFold();
    log.forEach(([key, value], offset) => fold.apply(offset, key, value));
    const expected = () => {
      assert.equal(fold.state().throttlers.size, 0, "the misplaced record was ended at its Kafka key");
      assert.deepEqual([...(fold.state().keys.get("per_customer")?.keys() ?? [])], ["stays"]);
      assert.equal(fold.state().keys.get("a")?.get("b")?.balance?.balance, -7);
      assert.equal(fold.misplacedKeys().size, 0);
    };
    expected();
    // Private, read here on purpose: what this test is about is that it does not grow with key churn.
    const tracked = Reflect.get(fold, "latestAt") as ReadonlyMap<string, number>;
    assert.deepEqual([...tracked.keys()], ["bucket/a/b"], "one offset kept: the Kafka key that held a misplaced record");
    // A reader that starts over from offset 0: nothing changes, the old record does not come back misplaced.
    log.forEach(([key, value], offset) => assert.equal(fold.apply(offset, key, value), false, `offset ${offset} read again`));
    expected();
  });

  it("a key deleted by a tombstone leaves nothing in the fold; a re-read from offset 0 brings none back", () => {
    const log: [string, string | null][] = [];
    // Key churn as a failover leader makes it: keys in debt, rewritten, then full again (a tombstone).
    for (let i = 0; i < 1_000; i++) log.push([keyBucketKey("per_customer", `k${i}`), encodeThrottler(keyRecord("per_customer", `k${i}`, -1))]);
    for (let i = 0; i < 1_000; i += 2) log.push([keyBucketKey("per_customer", `k${i}`), encodeThrottler(keyRecord("per_customer", `k${i}`, -2))]);
    for (let i = 0; i < 1_000; i++) if (i % 10 !== 0) log.push([keyBucketKey("per_customer", `k${i}`), null]);
    // Tombstones of keys this reader never saw a record of (compaction dropped it): nothing to keep either.
    for (let i = 0; i < 200; i++) log.push([keyBucketKey("per_customer", `gone${i}`), null]);
    log.push([
      bucketKey("rows"),
      encodeThrottler({ throttlerId: "rows", balance: { balance: -1, atMs: 1 }, limitPerSecond: 1, generation: 1, writtenAtMs: 1 }),
    ]);
    log.push([bucketKey("rows"), null]);
    const fold = new ControllerStateFold();
    log.forEach(([key, value], offset) => fold.apply(offset, key, value));
    const live = Array.from({ length: 100 }, (_, j) => `k${j * 10}`);
    const expected = () => {
      assert.deepEqual([...(fold.state().keys.get("per_customer")?.keys() ?? [])].sort(), [...live].sort());
      assert.equal(fold.state().keys.get("per_customer")?.get("k20")?.balance?.balance, -2, "the latest record of a key rewritten");
      assert.equal(fold.state().throttlers.size, 0);
      assert.equal(fold.recordCount, live.length, "one entry per live record: 1,201 deleted keys left nothing behind");
    };
    expected();
    // A reader that starts over from offset 0 (a rejoin with nothing committed): nothing changes at any point.
    const state = fold.state();
    log.forEach(([key, value], offset) => {
      assert.equal(fold.apply(offset, key, value), false, `offset ${offset} read again`);
      assert.equal(fold.state(), state);
    });
    expected();
    // And after the re-read, a new record of a deleted key is a record like any other.
    assert.equal(fold.apply(log.length, keyBucketKey("per_customer", "k1"), encodeThrottler(keyRecord("per_customer", "k1", -3))), true);
    assert.equal(fold.state().keys.get("per_customer")?.get("k1")?.balance?.balance, -3);
    assert.equal(fold.recordCount, live.length + 1);
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
