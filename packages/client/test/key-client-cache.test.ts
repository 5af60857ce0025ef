import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, sharedDispatchWindowCount } from "@sluice/core";
import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { FakeQuotaClient } from "@sluice/protocol/testing";
import { DistributedThrottlerFactory } from "../src/index.ts";
import { KEY_CLIENT_IDLE_MS } from "../src/key-client-cache.ts";

// A client's memory per key is bounded (docs/design.md §11.4): a key's client that had no call for
// KEY_CLIENT_IDLE_MS and holds nothing is retired (its pool given back) and dropped; its forKey
// handles stay valid and build a new one at their next call. A key that holds anything — a caller
// waiting, a refill in flight, units of a concurrency throttler — is kept, however long it is quiet.

function dynamicSpec(input: unknown): DynamicSpec {
  const result = validateDynamicSpec(input);
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

const SPEC = {
  throttlers: {
    per_customer: { limit: 10, request_period: "1s", keyed: {} },
    paced: { limit: 10, smooth: true, keyed: {} },
    slots: { kind: "concurrency", limit: 5, lease_timeout: "10s", keyed: {} },
  },
  computations: {},
};

function setup() {
  const clock = new ManualClock(1_000_000);
  const client = new FakeQuotaClient();
  const factory = new DistributedThrottlerFactory({ computation: "Enricher", clientId: "w1/Enricher/0", client: () => client, clock, random: () => 0.5 });
  factory.reconfigure(dynamicSpec(SPEC));
  return { clock, client, factory };
}

describe("a client's keys", () => {
  it("drops the clients of 1,000 keys used once after they idle, giving their pools back; a handle made before works after", async () => {
    const { clock, client, factory } = setup();
    const perCustomer = factory.getThrottlerOrThrow("per_customer");
    const first = perCustomer.forKey("customer-0");
    for (let i = 0; i < 1_000; i++) await perCustomer.forKey(`customer-${i}`).throttle(1);
    assert.equal(factory.keyClientCount, 1_000);
    const granted = client.calls.reduce((sum, call) => sum + call.amount, 0);
    assert.ok(granted > 1_000, `the clients prefetched (${granted} units for 1,000 calls)`);

    await clock.advance(KEY_CLIENT_IDLE_MS - 1_000);
    assert.equal(factory.keyClientCount, 1_000, "not before the idle time");
    await clock.advance(KEY_CLIENT_IDLE_MS / 2);
    assert.equal(factory.keyClientCount, 0, "every key's client is dropped by the periodic sweep");
    const returned = client.releases.reduce((sum, release) => sum + release.amount, 0);
    assert.equal(returned, granted - 1_000, "the unused pools went back to the controller, each with its key");
    assert.ok(client.releases.every((release) => release.key?.startsWith("customer-")));

    await first.throttle(1);
    assert.equal(factory.keyClientCount, 1, "the old handle built its key's client again");
    assert.equal(client.calls.at(-1)?.key, "customer-0");
    factory.close();
  });

  it("keeps a key whose caller waits, however long, and drops it once served and idle", async () => {
    const { clock, client, factory } = setup();
    const held: (() => void)[] = [];
    client.answer = () => new Promise<void>((resolve) => held.push(resolve));
    const waiting = factory.getThrottlerOrThrow("per_customer").forKey("slow").throttle(1);
    await clock.advance(3 * KEY_CLIENT_IDLE_MS);
    assert.equal(factory.keyClientCount, 1, "a refill in flight and a caller waiting: kept");
    client.answer = () => undefined; // later refills are answered at once
    for (const release of held.splice(0)) release();
    await waiting;
    await clock.advance(2 * KEY_CLIENT_IDLE_MS);
    assert.equal(factory.keyClientCount, 0);
    factory.close();
  });

  it("keeps a concurrency key while it holds units; released, it is dropped and the handle can take units again", async () => {
    const { clock, factory } = setup();
    const slot = factory.getThrottlerOrThrow("slots").forKey("tenant-a");
    await slot.throttle(2);
    await clock.advance(2 * KEY_CLIENT_IDLE_MS);
    assert.equal(factory.keyClientCount, 1, "two units held: kept");
    slot.release(2);
    await clock.advance(2 * KEY_CLIENT_IDLE_MS);
    assert.equal(factory.keyClientCount, 0);
    await slot.throttle(1);
    slot.release(1);
    factory.close();
  });

  it("a smooth key's dispatch window goes with its client", async () => {
    const { clock, factory } = setup();
    const before = sharedDispatchWindowCount(clock);
    const paced = factory.getThrottlerOrThrow("paced");
    for (let i = 0; i < 50; i++) paced.forKey(`host-${i}`);
    assert.equal(sharedDispatchWindowCount(clock), before + 50, "a window per key");
    await clock.advance(2 * KEY_CLIENT_IDLE_MS);
    assert.equal(factory.keyClientCount, 0);
    assert.equal(sharedDispatchWindowCount(clock), before, "no window left for the dropped keys");
    factory.close();
  });
});
