// The bounds of one record of `<pipeline>.controller-state` (docs/design.md §5.3), checked at the bound:
// pure functions (the bounding and the encoding), no broker; test/controller-state-bounds.test.ts
// writes the records at the bound to one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  PERSISTED_HOLDERS_MAX,
  PERSISTED_HOLDERS_MAX_BYTES,
  PERSISTED_REQUEST_IDS_MAX,
  PERSISTED_SILENCES_MAX_BYTES,
  STATE_RECORD_MAX_BYTES,
  UNLISTED_HOLDER,
  type PersistedLeases,
} from "@sluice/failover-ports";
import { ControllerStateFold } from "../src/controller-state-fold.ts";
import { bucketKey, encodeSpec, encodeThrottler } from "../src/controller-state-records.ts";
import { concurrencyRecord, leasesOf } from "./state-record-fixtures.ts";

const units = (leases: PersistedLeases) => Object.values(leases.holders).reduce((sum, byClass) => sum + Object.values(byClass).reduce((a, b) => a + b, 0), 0);

describe("bounds of a controller-state record", () => {
  it("a concurrency throttler with 10,000 holders and 1,000 request ids (ids of 64 characters) is kept whole and fits", () => {
    const leases = leasesOf(PERSISTED_HOLDERS_MAX, 64, PERSISTED_REQUEST_IDS_MAX);
    const record = concurrencyRecord(leases);
    assert.equal(Object.keys(record.leases!.holders).length, PERSISTED_HOLDERS_MAX);
    assert.equal(record.leases!.requestIds.length, PERSISTED_REQUEST_IDS_MAX);
    const bytes = Buffer.byteLength(encodeThrottler(record));
    assert.ok(bytes <= STATE_RECORD_MAX_BYTES, `${bytes} bytes ≤ ${STATE_RECORD_MAX_BYTES}`);
  });

  it("past the bound (20,000 holders with ids of 1,024 characters, 5,000 request ids) the record stays within it and frees no unit", () => {
    const leases = leasesOf(20_000, 1_024, 5_000);
    const record = concurrencyRecord(leases);
    const holders = Object.keys(record.leases!.holders);
    assert.ok(holders.length <= PERSISTED_HOLDERS_MAX, `${holders.length} holders listed`);
    assert.ok(Buffer.byteLength(JSON.stringify(record.leases!.holders)) <= PERSISTED_HOLDERS_MAX_BYTES);
    assert.ok(holders.includes(UNLISTED_HOLDER), "the rest are summed under one holder");
    assert.equal(units(record.leases!), units(leases), "every unit in use is still counted");
    assert.ok(
      record.leases!.requestIds.length < 5_000 && record.leases!.requestIds.at(-1)?.requestId === leases.requestIds.at(-1)?.requestId,
      "the newest request ids are kept",
    );
    const bytes = Buffer.byteLength(encodeThrottler(record));
    assert.ok(bytes <= STATE_RECORD_MAX_BYTES, `${bytes} bytes ≤ ${STATE_RECORD_MAX_BYTES}`);
  });

  it("past the bound with every holder silent, the silences keep to their budget: the longest kept, the stand-in holder gets the shortest it stands for", () => {
    const leases = leasesOf(20_000, 1_024, 5_000);
    const ids = Object.keys(leases.holders);
    // Holder i has been silent (i % 10 + 1) × 300 ms.
    const silentMs = Object.fromEntries(ids.map((id, i) => [id, ((i % 10) + 1) * 300]));
    const record = concurrencyRecord({ ...leases, silentMs });
    const silences = record.leases!.silentMs!;
    assert.ok(Buffer.byteLength(JSON.stringify(silences)) <= PERSISTED_SILENCES_MAX_BYTES, `${Buffer.byteLength(JSON.stringify(silences))} bytes of silences`);
    for (const id of Object.keys(silences)) assert.ok(Object.hasOwn(record.leases!.holders, id), "only listed holders have a silence");
    const kept = Object.values(silences);
    assert.ok(Math.min(...kept) >= 300 && kept.includes(3_000), "the longest silences are kept");
    if (Object.hasOwn(silences, UNLISTED_HOLDER)) assert.equal(silences[UNLISTED_HOLDER], 300, "the shortest silence of the holders it stands for");
    const bytes = Buffer.byteLength(encodeThrottler(record));
    assert.ok(bytes <= STATE_RECORD_MAX_BYTES, `${bytes} bytes ≤ ${STATE_RECORD_MAX_BYTES}`);
    // Within the bounds nothing is dropped.
    const few = concurrencyRecord({ holders: { a: { default: 1 }, b: { default: 2 } }, requestIds: [], silentMs: { a: 900 } });
    assert.deepEqual(few.leases!.silentMs, { a: 900 });
  });

  it("1,000 throttlers are 1,000 small records, each the size of one bucket", () => {
    const sizes = Array.from({ length: 1_000 }, (_, i) =>
      Buffer.byteLength(
        encodeThrottler({
          throttlerId: `throttler-${i}`,
          balance: { balance: -12.345678, atMs: 1_700_000_000_000 },
          limitPerSecond: 1_000,
          generation: 3,
          writtenAtMs: 1_700_000_000_000,
        }),
      ),
    );
    assert.ok(Math.max(...sizes) < 200, `largest ${Math.max(...sizes)} bytes`);
  });
});

describe("ControllerStateFold", () => {
  it("keeps the latest record of each key by offset: a re-read from offset 0 never goes back and ends at the same state", () => {
    const fold = new ControllerStateFold();
    const records: [number, string, string | null][] = [];
    for (let v = 1; v <= 3; v++) {
      records.push([records.length, "spec", encodeSpec({ version: v, dynamicSpecJson: "{}", generation: 4 - v, writtenAtMs: v })]);
      records.push([
        records.length,
        bucketKey("rows"),
        encodeThrottler({ throttlerId: "rows", balance: { balance: -v, atMs: v }, limitPerSecond: 1, generation: 1, writtenAtMs: v }),
      ]);
    }
    records.push([
      records.length,
      bucketKey("gone"),
      encodeThrottler({ throttlerId: "gone", balance: { balance: 1, atMs: 1 }, limitPerSecond: 1, generation: 1, writtenAtMs: 1 }),
    ]);
    records.push([records.length, bucketKey("gone"), null]);
    for (const [offset, key, value] of records) fold.apply(offset, key, value);
    const state = fold.state();
    assert.equal(state.spec?.version, 3, "offset order, though its generation is the lowest");
    assert.equal(state.throttlers.get("rows")?.balance?.balance, -3);
    assert.equal(state.throttlers.has("gone"), false, "deleted by its tombstone");
    for (const [offset, key, value] of records) {
      assert.equal(fold.apply(offset, key, value), false, `offset ${offset} read again changes nothing`);
      assert.equal(fold.state(), state);
    }
  });
});
