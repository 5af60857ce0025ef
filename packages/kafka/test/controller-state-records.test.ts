// The records of `<pipeline>.controller-state` and the leader choice of the election's assigner
// (DESIGN §7.4): pure functions, so no broker here; test/controller-*.test.ts runs them on one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { chooseLeader } from "../src/controller-election.ts";
import { LAW_STATE_FIELDS } from "../src/controller-state-adaptive.ts";
import { decodeStateRecord, encodeBuckets, encodeLeader, encodeSpec } from "../src/controller-state-records.ts";

describe("controller state records", () => {
  it("round-trip each kind through its snake_case JSON", () => {
    const spec = { version: 4, dynamicSpecJson: '{"throttlers":{}}', generation: 7, writtenAtMs: 1_000 };
    assert.deepEqual(decodeStateRecord("dynamic_spec", encodeSpec(spec)), { kind: "spec", record: spec });
    const buckets = { buckets: { rows: { balance: -3.5, atMs: 999 } }, generation: 7, writtenAtMs: 1_000 };
    assert.deepEqual(decodeStateRecord("buckets", encodeBuckets(buckets)), { kind: "buckets", record: buckets });
    assert.match(encodeBuckets(buckets), /"at_ms":999/);
    const leader = { address: "127.0.0.1:7070", memberId: "m-1", generation: 7, sinceMs: 1_000 };
    assert.deepEqual(decodeStateRecord("leader", encodeLeader(leader)), { kind: "leader", record: leader });
  });

  it("round-trip the leases of concurrency throttlers inside the buckets record, dropping what is malformed", () => {
    const leases = {
      tasks: {
        holders: { "w1/Admit/0": { default: 2, bulk: 1 } },
        requestIds: [{ requestId: "r-1", clientId: "w1/Admit/0", amount: 2, waitedMs: 5, expiresAtMs: 61_000 }],
      },
    };
    const buckets = { buckets: {}, leases, generation: 3, writtenAtMs: 1_000 };
    const encoded = encodeBuckets(buckets);
    assert.match(encoded, /"request_ids":\[\{"request_id":"r-1","client_id":"w1\/Admit\/0","amount":2,"waited_ms":5,"expires_at_ms":61000\}\]/);
    assert.deepEqual(decodeStateRecord("buckets", encoded), { kind: "buckets", record: buckets });
    assert.doesNotMatch(encodeBuckets({ buckets: {}, leases: {}, generation: 3, writtenAtMs: 1 }), /leases/);
    const bad = JSON.stringify({
      buckets: {},
      leases: { tasks: { holders: { a: { default: -1, x: "2" }, b: { default: 1 } }, request_ids: [{ request_id: 5 }, null] }, other: 7 },
      generation: 1,
    });
    assert.deepEqual(decodeStateRecord("buckets", bad), {
      kind: "buckets",
      record: { buckets: {}, leases: { tasks: { holders: { b: { default: 1 } }, requestIds: [] } }, generation: 1, writtenAtMs: 0 },
    });
  });

  it("round-trip the adaptive loops' state inside the buckets record; old records without it and malformed entries still read", () => {
    const adaptive = {
      cluster_tasks: { limitInForce: 40, law: { limit: 42, failures: 2, raisedLast: true, near: "below" as const, edge: "low" as const, lastUse: 38 }, decidedAtMs: 5_000 },
      api: { limitInForce: 7.5, law: { limit: 7.5, failures: 0, raisedLast: false, cutLast: true, inBandAfterRaise: false }, decidedAtMs: null },
    };
    const buckets = { buckets: {}, adaptive, generation: 4, writtenAtMs: 1_000 };
    const encoded = encodeBuckets(buckets);
    assert.match(encoded, /"cluster_tasks":\{"limit_in_force":40,"suggested_limit":42,"failures":2,"raised_last":true,"near":"below","edge":"low","last_use":38,"decided_at_ms":5000\}/);
    assert.deepEqual(decodeStateRecord("buckets", encoded), { kind: "buckets", record: buckets });
    assert.doesNotMatch(encodeBuckets({ buckets: {}, adaptive: {}, generation: 4, writtenAtMs: 1 }), /adaptive/);
    const bad = JSON.stringify({
      buckets: {},
      adaptive: { a: { limit_in_force: -1, suggested_limit: 3, failures: 0, raised_last: false }, b: { limit_in_force: 3, suggested_limit: 3, failures: 1, raised_last: false, near: "sideways" }, c: 9 },
      generation: 1,
    });
    assert.deepEqual(decodeStateRecord("buckets", bad), {
      kind: "buckets",
      record: { buckets: {}, adaptive: { b: { limitInForce: 3, law: { limit: 3, failures: 1, raisedLast: false }, decidedAtMs: null } }, generation: 1, writtenAtMs: 0 },
    });
  });

  it("persist every field of the adaptive law's state; a record from before steady_last, since_loss_cut and last_load reads with them absent", () => {
    // Every field set: what a leader holds right after a capacity-loss cut (sinceLossCut 0).
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
    const full = { buckets: {}, adaptive: { tasks: { limitInForce: 10, law, decidedAtMs: 9_000 } }, generation: 5, writtenAtMs: 9_001 };
    const encoded = encodeBuckets(full);
    assert.match(encoded, /"steady_last":true,"since_loss_cut":0,"last_load":0\.997,"last_use":20,"decided_at_ms":9000/);
    assert.deepEqual(decodeStateRecord("buckets", encoded), { kind: "buckets", record: full });

    // Written by the version before these three fields (its encoder's output, verbatim).
    const old =
      '{"buckets":{},"adaptive":{"tasks":{"limit_in_force":10,"suggested_limit":10,"failures":0,"raised_last":false,' +
      '"cut_last":true,"near":"above","last_use":20,"decided_at_ms":9000}},"generation":5,"written_at_ms":9001}';
    const decoded = decodeStateRecord("buckets", old);
    assert.equal(decoded.kind, "buckets");
    assert.deepEqual(decoded.kind === "buckets" ? decoded.record.adaptive : undefined, {
      tasks: { limitInForce: 10, law: { limit: 10, failures: 0, raisedLast: false, cutLast: true, near: "above", lastUse: 20 }, decidedAtMs: 9000 },
    });

    // A malformed new field is read as absent; the entry and its other fields still load.
    const bad = (fields: Record<string, unknown>) =>
      decodeStateRecord("buckets", JSON.stringify({ buckets: {}, adaptive: { t: { limit_in_force: 4, suggested_limit: 4, failures: 0, raised_last: false, ...fields } }, generation: 1 }));
    for (const fields of [{ steady_last: "yes" }, { since_loss_cut: 0.5 }, { since_loss_cut: -1 }, { last_load: -0.1 }, { last_load: "0.9" }, { last_load: null }]) {
      assert.deepEqual(bad(fields), {
        kind: "buckets",
        record: { buckets: {}, adaptive: { t: { limitInForce: 4, law: { limit: 4, failures: 0, raisedLast: false }, decidedAtMs: null } }, generation: 1, writtenAtMs: 0 },
      }, JSON.stringify(fields));
    }
  });

  it("reports a malformed record instead of throwing", () => {
    assert.equal(decodeStateRecord("buckets", "not json").kind, "unknown");
    assert.equal(decodeStateRecord("leader", JSON.stringify({ generation: 1 })).kind, "unknown");
    assert.equal(decodeStateRecord("dynamic_spec", JSON.stringify({ version: 1, dynamic_spec_json: "{}" })).kind, "unknown"); // no generation
    assert.equal(decodeStateRecord("other", JSON.stringify({ generation: 1 })).kind, "unknown");
    assert.equal(decodeStateRecord("buckets", null).kind, "unknown");
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
