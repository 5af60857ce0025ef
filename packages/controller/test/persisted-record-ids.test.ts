// The identity of a persisted record (docs/design.md §5.3, §9.1): a throttler's and a key's of a keyed
// throttler are of two kinds and never equal, whatever characters the ids and keys hold, so the
// leader's map of what to write (and of what it wrote) keeps one entry for each. In virtual time.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { persistedRecordId } from "@sluice/failover-ports";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";
import { persistedThrottlers } from "../src/failover/persisted-throttlers.ts";

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });

describe("persisted record ids", () => {
  it("a throttler whose id reads like a key's identity does not collide with that key", () => {
    const pairs: [string, string][] = [
      ["a", "b"],
      ["", ""],
      ["a/b", "c"],
      ['["a"', '"b"]'],
    ];
    for (const [throttlerId, key] of pairs) {
      const ofKey = persistedRecordId({ throttlerId, key });
      assert.notEqual(persistedRecordId({ throttlerId: ofKey }), ofKey, `throttler ${JSON.stringify(ofKey)} and key ${key} of ${throttlerId}`);
      assert.notEqual(persistedRecordId({ throttlerId: JSON.stringify([throttlerId, key]) }), ofKey);
    }
    assert.notEqual(persistedRecordId({ throttlerId: "a", key: "b/c" }), persistedRecordId({ throttlerId: "a/b", key: "c" }));
  });

  it('a throttler with the id ["a","b"] and key b of keyed throttler a, both in debt, are two records', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const odd = JSON.stringify(["a", "b"]);
    const parsed = validateDynamicSpec({ throttlers: { [odd]: { limit: 1, period: "1s" }, a: { limit: 1, period: "1s", keyed: {} } } });
    assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
    const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock });
    const ask = (throttlerId: string, key: string) =>
      controller.requestQuota({ throttlerId, clientId: "c", amount: 10, timestampMs: 0, quotaClassId: "", requestId: "", key }, context());
    await ask(odd, "");
    await ask("a", "b");
    const records = [...persistedThrottlers(controller, 1, clock.now()).values()].map(({ record }) => record);
    const inDebt = records.filter((r) => (r.balance?.balance ?? 0) < 0).map((r) => ({ throttlerId: r.throttlerId, key: r.key }));
    assert.deepEqual(
      inDebt.sort((x, y) => (x.throttlerId < y.throttlerId ? -1 : 1)),
      [
        { throttlerId: odd, key: undefined },
        { throttlerId: "a", key: "b" },
      ].sort((x, y) => (x.throttlerId < y.throttlerId ? -1 : 1)),
      "one record each: neither hides the other",
    );
    controller.close();
  });
});
