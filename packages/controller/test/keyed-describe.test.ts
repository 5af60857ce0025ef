import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSluiceError, ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller, type ControllerSnapshot } from "../src/index.ts";

// DescribeThrottlers for one throttler, and for one key of a keyed throttler (docs/design.md §11.4): the
// key's own bucket whether it is active, parked or not remembered, in virtual time.

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });

function setup() {
  const clock = new ManualClock(1_700_000_000_000);
  const parsed = validateDynamicSpec({
    throttlers: { per_customer: { limit: 10, period: "1s", keyed: { overrides: { acme: { limit: 100 } } } }, plain: { limit: 5 } },
  });
  assert.ok(parsed.ok);
  const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock });
  const ask = (key: string, amount: number) =>
    controller.requestQuota({ throttlerId: "per_customer", clientId: "w1", amount, timestampMs: 0, quotaClassId: "", requestId: "", key }, context());
  const describeFor = async (throttlerId?: string, key?: string) =>
    JSON.parse(
      (await controller.describeThrottlers(context(), { ...(throttlerId ? { throttlerId } : {}), ...(key ? { key } : {}) })).snapshotJson,
    ) as ControllerSnapshot;
  return { clock, controller, ask, describeFor };
}

describe("DescribeThrottlers for one key", () => {
  it("answers for one throttler, and for a key active, parked or new with its own figures", async () => {
    const { clock, controller, ask, describeFor } = setup();
    assert.equal((await describeFor()).throttlers.length, 2, "no filter: every throttler");
    const one = await describeFor("plain");
    assert.deepEqual(
      one.throttlers.map((t) => t.id),
      ["plain"],
    );

    await ask("debtor", 30); // 20 owed at 10/s
    await ask("acme", 1);
    const debtor = (await describeFor("per_customer", "debtor")).throttlers[0]?.keyed?.key;
    assert.equal(debtor?.state, "active");
    assert.equal(debtor?.balance, -20);
    assert.equal(debtor?.limit, 10);
    assert.equal(debtor?.override, false);
    const acme = (await describeFor("per_customer", "acme")).throttlers[0]?.keyed?.key;
    assert.equal(acme?.limit, 100, "an override's limit");
    assert.equal(acme?.override, true);

    await clock.advance(61_000); // past the parking delay: kept as its balance, which accrued
    const parked = (await describeFor("per_customer", "debtor")).throttlers[0]?.keyed?.key;
    assert.equal(parked?.state, "parked");
    assert.equal(parked?.balance, 10, "paid off and full again (capped at its capacity)");
    assert.ok((parked?.idleMs ?? 0) >= 61_000);

    const fresh = (await describeFor("per_customer", "never-seen")).throttlers[0]?.keyed?.key;
    assert.deepEqual({ state: fresh?.state, balance: fresh?.balance, idleMs: fresh?.idleMs }, { state: "new", balance: 10, idleMs: null });
    controller.close();
  });

  it("refuses a key of a throttler that is not keyed, an unknown throttler and a key without a throttler, saying so", async () => {
    const { controller, describeFor } = setup();
    await assert.rejects(
      describeFor("plain", "acme"),
      (error: unknown) => isSluiceError(error, "INVALID_REQUEST") && /"plain" is not keyed/.test(error.message),
    );
    await assert.rejects(
      describeFor("nope"),
      (error: unknown) => isSluiceError(error, "UNKNOWN_THROTTLER") && /"nope" is not declared[^]*"per_customer", "plain"/.test(error.message),
    );
    await assert.rejects(
      describeFor(undefined, "acme"),
      (error: unknown) => isSluiceError(error, "INVALID_REQUEST") && /needs the id of the keyed throttler/.test(error.message),
    );
    await assert.rejects(describeFor("per_customer", "x".repeat(300)), (error: unknown) => isSluiceError(error, "INVALID_REQUEST"));
    controller.close();
  });
});
