import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { firstValueFrom, from, toArray } from "rxjs";
import { ManualClock, isSluiceError } from "@sluice/core";
import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { DistributedThrottlerFactory, throttled } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

// forKey (docs/design.md §11.4) on the client side: each key draws from a client of its own that sends the
// key with every refill, sized by the key's own spec; handles survive reconfiguration; a throttler
// that is not keyed refuses forKey naming itself; throttled() picks the key per value.

function dynamicSpec(input: unknown): DynamicSpec {
  const result = validateDynamicSpec(input);
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

const spec = {
  throttlers: {
    per_customer: { limit: 10, request_period: "1s", keyed: { overrides: { acme: { limit: 1000 } } } },
    plain: { limit: 10 },
  },
  computations: {},
};

function setup() {
  const clock = new ManualClock(1_000_000);
  const client = new FakeQuotaClient();
  const factory = new DistributedThrottlerFactory({ computation: "Enricher", clientId: "w1/Enricher/0", client: () => client, clock, random: () => 0.5 });
  factory.reconfigure(dynamicSpec(spec));
  return { clock, client, factory };
}

describe("forKey", () => {
  it("sends each key with its refills, one client per key sized by the key's own limit", async () => {
    const { client, factory } = setup();
    const perCustomer = factory.getThrottlerOrThrow("per_customer");
    await perCustomer.forKey("acme").throttle(1);
    await perCustomer.forKey("small").throttle(1);
    const acme = client.calls.filter((c) => c.key === "acme");
    const small = client.calls.filter((c) => c.key === "small");
    assert.ok(acme.length > 0 && small.length > 0, "both keys asked the controller");
    assert.ok(
      client.calls.every((c) => c.key === "acme" || c.key === "small"),
      "no refill without a key",
    );
    assert.ok(Math.max(...acme.map((c) => c.amount)) > Math.max(...small.map((c) => c.amount)), "acme prefetches for its limit of 1000/s");
  });

  it("refuses forKey on a throttler that is not keyed, and keys that are empty or too long, naming the throttler", () => {
    const { factory } = setup();
    assert.throws(
      () => factory.getThrottlerOrThrow("plain").forKey("acme"),
      (error: unknown) => isSluiceError(error, "INVALID_REQUEST") && /throttler "plain" is not keyed/.test(error.message),
    );
    const perCustomer = factory.getThrottlerOrThrow("per_customer");
    assert.throws(() => perCustomer.forKey(""), /forKey on throttler "per_customer": the key is empty/);
    assert.throws(() => perCustomer.forKey("€".repeat(86)), /the key has 258 UTF-8 bytes/);
  });

  it("a key handle survives reconfiguration, and fails with THROTTLER_NOT_DECLARED once its throttler is removed", async () => {
    const { factory } = setup();
    const acme = factory.getThrottlerOrThrow("per_customer").forKey("acme");
    await acme.throttle(1);
    factory.reconfigure(dynamicSpec({ ...spec, throttlers: { ...spec.throttlers, per_customer: { ...spec.throttlers.per_customer, limit: 20 } } }));
    await acme.throttle(1);
    factory.reconfigure(dynamicSpec({ throttlers: { plain: { limit: 10 } }, computations: {} }));
    await assert.rejects(acme.throttle(1), (error: unknown) => isSluiceError(error, "THROTTLER_NOT_DECLARED"));
  });

  it("throttled() with a key function draws each value from its key's bucket", async () => {
    const { client, factory } = setup();
    const values = [{ customer: "acme" }, { customer: "small" }, { customer: "acme" }];
    const out = await firstValueFrom(from(values).pipe(throttled(factory.getThrottlerOrThrow("per_customer"), { key: (v) => v.customer }), toArray()));
    assert.deepEqual(out, values);
    assert.deepEqual([...new Set(client.calls.map((c) => c.key))].sort(), ["acme", "small"]);
  });
});
