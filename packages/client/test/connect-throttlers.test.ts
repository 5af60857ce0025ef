// connectThrottlers' own logic against scripted connections: what it waits for, what it refuses and
// how, where calls go with several addresses, and that close() returns the pool before the channels
// close. The same client against a real `sluice controller` is test/e2e/standalone-client.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSluiceError, SluiceError } from "@sluice/core";
import { connectThrottlers, type ConnectThrottlersOptions } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

const SPEC = JSON.stringify({ throttlers: { api: { limit: 100, request_period: "1s" }, pdf: { limit: 10 } } });

function withFakes(fakes: Record<string, FakeQuotaClient>, extra: Partial<ConnectThrottlersOptions> = {}): ConnectThrottlersOptions {
  return {
    controller: Object.keys(fakes),
    clientId: "billing-1",
    log: null,
    connect: (address) => {
      const fake = fakes[address];
      if (!fake) throw new Error(`no fake for ${address}`);
      return fake;
    },
    ...extra,
  };
}

describe("connectThrottlers", () => {
  it("resolves with the controller's dynamic_spec and hands out the same handle per id", async () => {
    const fake = new FakeQuotaClient();
    fake.dynamicSpecJson = SPEC;
    const throttlers = await connectThrottlers(withFakes({ "127.0.0.1:7070": fake }));
    assert.equal(throttlers.dynamicSpecVersion, 1);
    assert.deepEqual(Object.keys(throttlers.dynamicSpec.throttlers).sort(), ["api", "pdf"]);
    const api = throttlers.getThrottlerOrThrow("api");
    assert.equal(throttlers.getThrottlerOrThrow("api"), api);
    await api.throttle(1);
    assert.equal(fake.calls[0]?.throttlerId, "api");
    assert.equal(fake.calls[0]?.clientId, "billing-1");
    assert.equal(throttlers.tryGetThrottler("nope"), null);
    await throttlers.close();
  });

  it("refuses an undeclared id with THROTTLER_NOT_DECLARED naming the declared ones", async () => {
    const fake = new FakeQuotaClient();
    fake.dynamicSpecJson = SPEC;
    const throttlers = await connectThrottlers(withFakes({ "127.0.0.1:7070": fake }));
    assert.throws(
      () => throttlers.getThrottlerOrThrow("external_api"),
      (error: unknown) =>
        isSluiceError(error, "THROTTLER_NOT_DECLARED") &&
        /"external_api"/.test(error.message) &&
        /declared: "api", "pdf"/.test(error.message) &&
        /127\.0\.0\.1:7070/.test(error.message),
    );
    await throttlers.close();
  });

  it("sends the quota class given for a throttler, and the default class elsewhere", async () => {
    const fake = new FakeQuotaClient();
    fake.dynamicSpecJson = SPEC;
    const throttlers = await connectThrottlers(withFakes({ "127.0.0.1:7070": fake }, { quotaClass: { api: "vip" } }));
    await throttlers.getThrottlerOrThrow("api").throttle(1);
    await throttlers.getThrottlerOrThrow("pdf").throttle(1);
    // The prefetching client may send more than one refill per throttler: each carries the class.
    const classes = new Set(fake.calls.map((c) => `${c.throttlerId}=${c.quotaClassId}`));
    assert.deepEqual([...classes].sort(), ["api=vip", "pdf="]);
    await throttlers.close();
  });

  it("fails at once with UNAUTHENTICATED when the controller refuses the token", async () => {
    const fake = new FakeQuotaClient();
    fake.watchDynamicSpec = async () => {
      throw new SluiceError("UNAUTHENTICATED", "WatchDynamicSpec: wrong token");
    };
    const startedAt = Date.now();
    await assert.rejects(connectThrottlers(withFakes({ "127.0.0.1:7070": fake }, { connectTimeoutMs: 30_000 })), (error: unknown) =>
      isSluiceError(error, "UNAUTHENTICATED"),
    );
    assert.ok(Date.now() - startedAt < 10_000, "did not wait for the connect timeout");
  });

  it("gives up with CONTROLLER_UNAVAILABLE, the address and the last error, when no dynamic_spec comes", async () => {
    const fake = new FakeQuotaClient(); // no dynamic_spec scripted: every watch fails as unavailable
    await assert.rejects(connectThrottlers(withFakes({ "127.0.0.1:7070": fake }, { connectTimeoutMs: 300 })), (error: unknown) => {
      assert.ok(isSluiceError(error, "CONTROLLER_UNAVAILABLE"));
      assert.match(error.message, /127\.0\.0\.1:7070 within 300 ms/);
      assert.match(error.message, /last error: CONTROLLER_UNAVAILABLE: not scripted/);
      assert.equal(error.retriable, true);
      return true;
    });
  });

  it("moves to the next address when a controller does not serve, and stays there", async () => {
    const follower = new FakeQuotaClient(); // answers nothing: unavailable
    const leader = new FakeQuotaClient();
    leader.dynamicSpecJson = SPEC;
    const throttlers = await connectThrottlers(withFakes({ "127.0.0.1:7070": follower, "127.0.0.1:7071": leader }));
    assert.equal(throttlers.controllerAddress, "127.0.0.1:7071");
    await throttlers.getThrottlerOrThrow("api").throttle(1);
    assert.ok(leader.calls.length >= 1);
    assert.equal(follower.calls.length, 0);
    await throttlers.close();
  });

  it("close() returns the unused prefetched quota, waits for that release, and fails later calls", async () => {
    const fake = new FakeQuotaClient();
    fake.dynamicSpecJson = SPEC;
    let releaseSettled = false;
    let closedWhileReleasing = false;
    const releaseQuota = fake.releaseQuota.bind(fake);
    fake.releaseQuota = async (call) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      await releaseQuota(call);
      releaseSettled = true;
    };
    fake.close = () => {
      closedWhileReleasing = !releaseSettled;
    };
    const throttlers = await connectThrottlers(withFakes({ "127.0.0.1:7070": fake }));
    const api = throttlers.getThrottlerOrThrow("api");
    await api.throttle(1); // the refill brings a prefetch window: more than the 1 unit used
    const requested = fake.calls.reduce((sum, c) => sum + c.amount, 0);
    assert.ok(requested > 1, `expected a prefetching refill, got ${requested}`);
    await throttlers.close();
    const returned = fake.releases.reduce((sum, r) => sum + r.amount, 0);
    assert.equal(returned, requested - 1);
    assert.equal(closedWhileReleasing, false, "the channel closed before the pool was returned");
    await assert.rejects(api.throttle(1), (error: unknown) => isSluiceError(error, "CANCELLED") && /was closed/.test(error.message));
  });

  it("refuses malformed options with what was given", async () => {
    await assert.rejects(connectThrottlers({ controller: [], clientId: "x" }), /at least one "host:port"/);
    await assert.rejects(connectThrottlers({ controller: "localhost", clientId: "x" }), /got "localhost"/);
    await assert.rejects(connectThrottlers({ controller: "127.0.0.1:7070", clientId: " " }), /"clientId" must be a non-empty string/);
  });
});
