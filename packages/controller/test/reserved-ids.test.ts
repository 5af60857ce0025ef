// docs/design.md §5.3, issue 19 item 8: ids from clients and specs (client ids, request ids, throttler and
// class ids) named `__proto__`, `constructor` or `prototype` are ordinary ids — a holder called
// `__proto__` is counted in snapshots and survives a persist/restore through JSON like any other.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { parseJson, validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";
import type { PersistedLeases } from "@sluice/failover-ports";

// Parsed from JSON text, as specs arrive: a literal `{ constructor: … }` would be the same, but
// the point is to read ids exactly as a file or the wire gives them.
const SPEC_JSON = `{
  "throttlers": {
    "tasks": { "kind": "concurrency", "limit": 10, "lease_timeout": "30s", "classes": { "constructor": { "weight": 1 }, "prototype": { "weight": 1 } } },
    "constructor": { "limit": 100, "period": "1s", "classes": { "prototype": { "weight": 3 } } },
    "prototype": { "kind": "concurrency", "limit": 4 }
  }
}`;

function controller(clock: ManualClock): Controller {
  const parsed = parseJson(SPEC_JSON);
  assert.ok(parsed.ok);
  const spec = validateDynamicSpec(parsed.value);
  assert.ok(spec.ok, spec.ok ? "" : JSON.stringify(spec.issues));
  return new Controller({ dynamicSpec: spec.value, computations: [], clock });
}

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const ask = (c: Controller, throttlerId: string, clientId: string, amount: number, quotaClassId = "", requestId = "") =>
  c.requestQuota({ throttlerId, clientId, amount, timestampMs: 0, quotaClassId, requestId }, context());

describe("ids named __proto__, constructor and prototype", () => {
  it("a holder with client id __proto__ is counted in snapshots and after persist/restore through JSON", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const first = controller(clock);
    await ask(first, "tasks", "__proto__", 3, "constructor", "__proto__");
    await ask(first, "tasks", "constructor", 2, "prototype", "constructor");
    await ask(first, "prototype", "prototype", 1);
    const tasks = (c: Controller) => c.snapshot().throttlers.find((t) => t.id === "tasks");
    assert.equal(tasks(first)?.concurrency?.holders, 2);
    assert.equal(tasks(first)?.concurrency?.heldUnits, 5);

    // What a failover leader persists, as the bytes of a record and back.
    const persisted = JSON.parse(JSON.stringify(first.leaseState())) as Record<string, PersistedLeases>;
    assert.deepEqual(Object.keys(persisted).sort(), ["prototype", "tasks"]);
    assert.deepEqual(Object.keys(persisted["tasks"]?.holders ?? {}).sort(), ["__proto__", "constructor"]);
    assert.equal(Object.getOwnPropertyDescriptor(persisted["tasks"]?.holders, "__proto__")?.value?.["constructor"], 3);
    first.close();

    const successor = controller(clock);
    assert.deepEqual(successor.restoreLeases(persisted), { tasks: 5, prototype: 1 });
    assert.equal(tasks(successor)?.concurrency?.holders, 2, "the __proto__ holder is a holder");
    assert.equal(tasks(successor)?.concurrency?.heldUnits, 5);
    assert.equal(tasks(successor)?.inUse, 5, "3 + 2 units in use: only 5 of 10 free");
    // The replay of the __proto__ holder's request id is answered from its restored lease, no second lease.
    assert.equal((await ask(successor, "tasks", "__proto__", 3, "constructor", "__proto__")).granted, 3);
    assert.equal(tasks(successor)?.inUse, 5);
    // Its release frees exactly its 3 units.
    await successor.releaseQuota({ throttlerId: "tasks", clientId: "__proto__", amount: 3, quotaClassId: "constructor" }, context());
    assert.equal(tasks(successor)?.inUse, 2);
    successor.close();
  });

  it("throttler constructor and class prototype serve requests; an undeclared id is UNKNOWN_THROTTLER, not Object's members", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const c = controller(clock);
    const grant = await ask(c, "constructor", "__proto__", 5, "prototype");
    assert.equal(grant.granted, 5);
    const snapshot = c.snapshot().throttlers.find((t) => t.id === "constructor");
    assert.deepEqual(snapshot?.classes.map((k) => k.id).sort(), ["default", "prototype"]);
    assert.equal(snapshot?.classes.find((k) => k.id === "prototype")?.weight, 3);
    assert.deepEqual(Object.keys(c.bucketBalances()).sort(), ["constructor", "prototype", "tasks"]);
    await assert.rejects(ask(c, "hasOwnProperty", "a", 1), (error: Error) => /UNKNOWN_THROTTLER/.test(error.message));
    await assert.rejects(ask(c, "__proto__", "a", 1), (error: Error) => /UNKNOWN_THROTTLER/.test(error.message));
    c.close();
  });
});
