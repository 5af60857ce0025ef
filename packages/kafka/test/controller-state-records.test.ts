// The records of `<pipeline>.controller-state` and the leader choice of the election's assigner
// (docs/design.md §5.2): pure functions, so no broker here; test/controller-*.test.ts runs them on one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { chooseLeader, onClock } from "../src/kafka-controller-election.ts";
import { LAW_STATE_FIELDS } from "../src/controller-state-adaptive.ts";
import type { PersistedThrottler } from "@sluice/failover-ports";
import { bucketKey, decodeStateRecord, encodeLeader, encodeSpec, encodeThrottler, type DecodedRecord } from "../src/controller-state-records.ts";

/** A throttler record as a reader gets it back from the topic. */
function roundTrip(record: PersistedThrottler): DecodedRecord {
  return decodeStateRecord(bucketKey(record.throttlerId), encodeThrottler(record));
}

const throttler = (throttlerId: string, more: Partial<PersistedThrottler> = {}): PersistedThrottler => ({
  throttlerId,
  balance: null,
  limitPerSecond: null,
  generation: 7,
  writtenAtMs: 1_000,
  ...more,
});

describe("controller state records", () => {
  it("round-trip each kind through its snake_case JSON: spec, leader, and one record per throttler", () => {
    const spec = { version: 4, dynamicSpecJson: '{"throttlers":{}}', generation: 7, writtenAtMs: 1_000 };
    assert.deepEqual(decodeStateRecord("spec", encodeSpec(spec)), { kind: "spec", record: spec });
    const rows = throttler("rows", { balance: { balance: -3.5, atMs: 999 }, limitPerSecond: 5 });
    assert.deepEqual(roundTrip(rows), { kind: "throttler", record: rows });
    assert.equal(bucketKey("rows"), "bucket/rows");
    assert.match(encodeThrottler(rows), /^\{"throttler":"rows","balance":-3\.5,"at_ms":999,"limit_per_s":5,/);
    const leader = { address: "127.0.0.1:7070", memberId: "m-1", generation: 7, sinceMs: 1_000 };
    assert.deepEqual(decodeStateRecord("leader", encodeLeader(leader)), { kind: "leader", record: leader });
    assert.deepEqual(decodeStateRecord("bucket/rows", null), { kind: "deleted", stateKey: "bucket/rows" });
    // The identity is in the value: an id with "/" (and later a key) reads back whole.
    assert.deepEqual(roundTrip(throttler("a/b")), { kind: "throttler", record: throttler("a/b") });
  });

  it("round-trip a concurrency throttler's leases, dropping what is malformed", () => {
    const leases = {
      holders: { "w1/Admit/0": { default: 2, bulk: 1 } },
      requestIds: [{ requestId: "r-1", clientId: "w1/Admit/0", amount: 2, waitedMs: 5, expiresAtMs: 61_000 }],
    };
    const tasks = throttler("tasks", { leases });
    assert.match(encodeThrottler(tasks), /"request_ids":\[\{"request_id":"r-1","client_id":"w1\/Admit\/0","amount":2,"waited_ms":5,"expires_at_ms":61000\}\]/);
    assert.deepEqual(roundTrip(tasks), { kind: "throttler", record: tasks });
    const bad = JSON.stringify({
      throttler: "tasks",
      leases: { holders: { a: { default: -1, x: "2" }, b: { default: 1 } }, request_ids: [{ request_id: 5 }, null] },
    });
    assert.deepEqual(decodeStateRecord("bucket/tasks", bad), {
      kind: "throttler",
      record: { ...throttler("tasks", { generation: 0, writtenAtMs: 0 }), leases: { holders: { b: { default: 1 } }, requestIds: [] } },
    });
  });

  it("round-trip the holders' silences (time leaders served without hearing from them); a silence of no listed holder, or not a number > 0, is dropped", () => {
    const leases = { holders: { a: { default: 2 }, b: { default: 1 } }, requestIds: [], silentMs: { a: 900 } };
    const tasks = throttler("tasks", { leases });
    assert.match(encodeThrottler(tasks), /"silent_ms":\{"a":900\}/);
    assert.deepEqual(roundTrip(tasks), { kind: "throttler", record: tasks });
    assert.doesNotMatch(encodeThrottler(throttler("tasks", { leases: { ...leases, silentMs: {} } })), /silent_ms/);
    const bad = JSON.stringify({
      throttler: "tasks",
      leases: { holders: { a: { default: 1 }, b: { default: 1 } }, request_ids: [], silent_ms: { a: -5, b: "9", c: 300, __proto__: 1 } },
    });
    const decoded = decodeStateRecord("bucket/tasks", bad);
    assert.equal(decoded.kind, "throttler");
    assert.deepEqual(decoded.kind === "throttler" ? decoded.record.leases : null, { holders: { a: { default: 1 }, b: { default: 1 } }, requestIds: [] });
  });

  it("round-trip an adaptive loop's state, every field of the law; malformed optional fields read as absent", () => {
    const law = {
      limit: 10,
      failures: 1,
      raisedLast: false,
      cutLast: true,
      inBandAfterRaise: false,
      near: "above" as const,
      edge: "high" as const,
      steadyLast: true,
      sinceLossCut: 0,
      lastLoad: 0.997,
      lastUse: 20,
    };
    assert.deepEqual(Object.keys(law).sort(), Object.keys(LAW_STATE_FIELDS).sort(), "the test sets every field the law has");
    const tasks = throttler("tasks", { adaptive: { limitInForce: 10, law, decidedAtMs: 9_000 }, balance: { balance: 1, atMs: 9_000 }, limitPerSecond: 10 });
    assert.match(encodeThrottler(tasks), /"steady_last":true,"since_loss_cut":0,"last_load":0\.997,"last_use":20,"decided_at_ms":9000/);
    assert.deepEqual(roundTrip(tasks), { kind: "throttler", record: tasks });
    const bad = (fields: Record<string, unknown>) =>
      decodeStateRecord(
        "bucket/t",
        JSON.stringify({ throttler: "t", adaptive: { limit_in_force: 4, suggested_limit: 4, failures: 0, raised_last: false, ...fields } }),
      );
    for (const fields of [
      { steady_last: "yes" },
      { since_loss_cut: 0.5 },
      { since_loss_cut: -1 },
      { last_load: -0.1 },
      { last_load: "0.9" },
      { last_load: null },
    ]) {
      const decoded = bad(fields);
      assert.deepEqual(
        decoded.kind === "throttler" ? decoded.record.adaptive : undefined,
        { limitInForce: 4, law: { limit: 4, failures: 0, raisedLast: false }, decidedAtMs: null },
        JSON.stringify(fields),
      );
    }
  });

  it("read the records written before one record per throttler (`buckets`, `dynamic_spec`), so an upgrade is not a free bucket", () => {
    const old =
      '{"buckets":{"rows":{"balance":-4,"at_ms":900}},"leases":{"tasks":{"holders":{"w":{"default":2}},"request_ids":[]}},' +
      '"adaptive":{"tasks":{"limit_in_force":10,"suggested_limit":10,"failures":0,"raised_last":false,"decided_at_ms":9000}},"generation":5,"written_at_ms":9001}';
    const decoded = decodeStateRecord("buckets", old);
    assert.equal(decoded.kind, "legacy-buckets");
    const records = decoded.kind === "legacy-buckets" ? decoded.records : [];
    assert.deepEqual(
      records.map((r) => [r.throttlerId, r.balance, r.limitPerSecond, r.leases?.holders, r.adaptive?.limitInForce]),
      [
        ["rows", { balance: -4, atMs: 900 }, null, undefined, undefined],
        ["tasks", null, null, { w: { default: 2 } }, 10],
      ],
    );
    const spec = decodeStateRecord("dynamic_spec", JSON.stringify({ version: 3, dynamic_spec_json: "{}", generation: 2 }));
    assert.equal(spec.kind === "spec" ? spec.record.version : null, 3);
  });

  it("reports a malformed record instead of throwing", () => {
    assert.equal(decodeStateRecord("bucket/x", "not json").kind, "unknown");
    assert.equal(decodeStateRecord("bucket/x", JSON.stringify({ balance: 1 })).kind, "unknown"); // no "throttler"
    assert.equal(decodeStateRecord("leader", JSON.stringify({ generation: 1 })).kind, "unknown");
    assert.equal(decodeStateRecord("spec", JSON.stringify({ dynamic_spec_json: "{}" })).kind, "unknown");
    assert.equal(decodeStateRecord("other", JSON.stringify({ generation: 1 })).kind, "unknown");
    assert.equal(decodeStateRecord("spec", null).kind, "unknown");
  });
});

describe("chooseLeader", () => {
  const member = (memberId: string, address: string, leads: number | null) => ({ memberId, claim: { address, leads } });

  it("keeps the member that claims the highest generation, so a joining member never takes over", () => {
    const chosen = chooseLeader([member("a", "127.0.0.1:1", null), member("b", "127.0.0.1:9", 5), member("c", "127.0.0.1:2", null)]);
    assert.equal(chosen?.memberId, "b");
  });

  it("prefers the newer of two claims (a paused leader that came back claims an older generation)", () => {
    const chosen = chooseLeader([member("old", "127.0.0.1:1", 3), member("new", "127.0.0.1:2", 4)]);
    assert.equal(chosen?.memberId, "new");
  });

  it("without claims picks the smallest address, then the smallest member id", () => {
    assert.equal(chooseLeader([member("z", "127.0.0.1:8", null), member("y", "127.0.0.1:7", null)])?.memberId, "y");
    assert.equal(chooseLeader([member("z", "h:1", null), member("y", "h:1", null)])?.memberId, "y");
    assert.equal(chooseLeader([]), null);
  });
});

describe("onClock (the election's times on the controller's clock)", () => {
  it("takes the time elapsed on the wall clock from the controller clock's now, and knows nothing safely after a step back", () => {
    assert.equal(onClock(1_000, 1_250, 50_000), 49_750);
    assert.equal(onClock(1_000, 900, 50_000), null, "the wall clock stepped back while the request was out");
  });
});
