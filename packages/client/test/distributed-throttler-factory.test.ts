import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, RESOLVED, SluiceError, isSluiceError, maxPacedAnswer } from "@sluice/core";
import { throttlerSpecSchema, validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { smoothPrefetchWindow } from "../src/client-config.ts";
import { DistributedThrottlerFactory } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

function dynamicSpec(input: unknown): DynamicSpec {
  const result = validateDynamicSpec(input);
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

const base = {
  throttlers: {
    rows: { limit: 100, request_period: "1s", classes: { vip: { weight: 5 } } },
    api: { limit: 10, request_period: "1s" },
  },
  computations: { Enricher: { input_rows_throttler_id: "rows", input_rows_throttler_class_id: "vip" } },
};

function setup(spec: unknown = base) {
  const clock = new ManualClock(1_000_000);
  const client = new FakeQuotaClient();
  const factory = new DistributedThrottlerFactory({
    computation: "Enricher",
    clientId: "w1/Enricher/0",
    client: () => client,
    clock,
    random: () => 0.5,
  });
  factory.reconfigure(dynamicSpec(spec));
  return { clock, client, factory };
}

describe("DistributedThrottlerFactory", () => {
  it("sends the class of the computation and the lag timestamp read at RPC time", async () => {
    const { client, factory } = setup();
    const rows = factory.getThrottlerOrThrow("rows");
    factory.setPriority(1234);
    await rows.throttle(1);
    factory.setPriority(99);
    await factory.getThrottlerOrThrow("api").throttle(1);
    // the first refill of each client (a waiting caller also queues one more ahead of demand)
    const firstPerThrottler = ["rows", "api"].map((id) => client.calls.find((c) => c.throttlerId === id));
    assert.deepEqual(
      firstPerThrottler.map((c) => [c?.throttlerId, c?.quotaClassId, c?.timestampMs, c?.clientId]),
      [
        ["rows", "vip", 1234, "w1/Enricher/0"],
        ["api", "", 99, "w1/Enricher/0"],
      ],
    );
  });

  it("a smooth throttler's client asks for at most max_grant_amount per answer, so a large throttle(n) is split", async () => {
    const { clock, client, factory } = setup({
      throttlers: { pdf: { limit: 100, request_period: "1s", smooth: true, max_grant_amount: 4 } },
      computations: {},
    });
    let done = false;
    void factory
      .getThrottlerOrThrow("pdf")
      .throttle(10)
      .then(() => (done = true));
    await clock.advanceUntil(() => done, 10, 5_000);
    assert.equal(done, true);
    const amounts = client.calls.map((call) => call.amount);
    assert.ok(amounts.length >= 3 && amounts.every((amount) => amount <= 4), `answers of at most 4 units: ${amounts.join(", ")}`);
  });

  it("a smooth client's largest answer is the one the controller's start gap counts on", () => {
    for (const [limit, requestPeriod] of [
      [10, "5s"],
      [10, "100ms"],
      [1000, "500ms"],
      [3.5, "2s"],
      [0.4, "1s"],
    ] as const) {
      const spec = throttlerSpecSchema.parse({ limit, request_period: requestPeriod, smooth: true });
      const cap = smoothPrefetchWindow(spec).maxPrefetchAmount;
      assert.equal(cap, maxPacedAnswer({ limit, requestPeriodMs: spec.request_period }), `limit ${limit}, request_period ${requestPeriod}`);
    }
  });

  it("throws THROTTLER_NOT_DECLARED for an undeclared id, naming the declared ones", () => {
    const { factory } = setup();
    assert.equal(factory.tryGetThrottler("nope"), null);
    assert.throws(
      () => factory.getThrottlerOrThrow("nope"),
      (e: unknown) => isSluiceError(e, "THROTTLER_NOT_DECLARED") && /"nope".*declared: "rows", "api"/.test(e.message),
    );
  });

  it("keeps the client (and its pool) when only controller-side fields change", async () => {
    const { client, factory } = setup();
    const rows = factory.getThrottlerOrThrow("rows");
    await rows.throttle(1);
    await new Promise((resolve) => setImmediate(resolve)); // the refill queued ahead of demand lands
    rows.release(10); // the pool now holds at least 10 units
    const rpcsBefore = client.calls.length;
    factory.reconfigure(
      dynamicSpec({
        ...base,
        throttlers: { ...base.throttlers, rows: { ...base.throttlers.rows, period: "2s", max_grant_amount: 5, classes: { vip: { weight: 1 } } } },
      }),
    );
    assert.equal(factory.getThrottlerOrThrow("rows"), rows, "the same handle");
    // Answered from the pool kept across the change: synchronously (the shared resolved promise), no RPC.
    assert.equal(rows.throttle(10), RESOLVED, "served from the kept pool");
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(client.calls.length, rpcsBefore, "no new client, no new RPC");
    assert.deepEqual(client.releases, [], "no retired client handed its pool back");
  });

  it("rebuilds the client when its own config changes; the handle taken before keeps working", async () => {
    const { client, factory } = setup();
    const rows = factory.getThrottlerOrThrow("rows");
    await rows.throttle(1);
    factory.reconfigure(dynamicSpec({ ...base, throttlers: { ...base.throttlers, rows: { ...base.throttlers.rows, limit: 500 } } }));
    const calls = client.calls.length;
    await rows.throttle(1);
    assert.ok(client.calls.length > calls, "a fresh client refilled");
    assert.equal(client.calls.at(-1)?.quotaClassId, "vip");
  });

  it("detaches a removed throttler and reattaches the same handle when it is declared again", async () => {
    const { factory } = setup();
    const api = factory.getThrottlerOrThrow("api");
    factory.reconfigure(dynamicSpec({ throttlers: { rows: base.throttlers.rows }, computations: {} }));
    assert.equal(factory.tryGetThrottler("api"), null);
    await assert.rejects(api.throttle(1), (e: unknown) => isSluiceError(e, "THROTTLER_NOT_DECLARED"));
    factory.reconfigure(dynamicSpec(base));
    assert.equal(factory.tryGetThrottler("api"), api);
    await api.throttle(1);
  });

  it("retries a refill under one request id while the controller is away, then succeeds", async () => {
    const { client, clock, factory } = setup({ throttlers: { api: { limit: 10, retrying_channel: { min_backoff: "100ms", max_backoff: "1s" } } } });
    let failuresLeft = 3;
    client.answer = () => {
      if (failuresLeft-- > 0) throw new SluiceError("CONTROLLER_UNAVAILABLE", "connection refused");
    };
    let done = false;
    const waiting = factory
      .getThrottlerOrThrow("api")
      .throttle(1)
      .then(() => (done = true));
    await clock.advance(100 + 150 + 225 - 1);
    assert.equal(done, false, "still blocked while retrying");
    await clock.advance(10);
    await waiting;
    const attempts = client.calls.slice(0, 4);
    assert.equal(new Set(attempts.map((c) => c.requestId)).size, 1, "one request id across the 4 attempts");
    const metrics = factory.getThrottlerOrThrow("api").metrics();
    assert.equal(metrics.rpcFailures, 3);
    assert.ok(metrics.rpcCount >= 4);
  });

  it("counts as returned the prefetched quota a client hands back to the controller", async () => {
    const { client, factory } = setup();
    const api = factory.getThrottlerOrThrow("api");
    await api.throttle(1);
    await new Promise((resolve) => setImmediate(resolve)); // let the refill queued ahead of demand land
    api.release(2); // the caller's own release: counted as released, and it stays in the pool
    factory.close();
    await new Promise((resolve) => setImmediate(resolve));
    const sent = client.releases.filter((r) => r.throttlerId === "api").reduce((sum, r) => sum + r.amount, 0);
    const metrics = api.metrics();
    assert.ok(sent > 0, "the pool went back on close");
    assert.equal(metrics.returned, sent, "returned = what ReleaseQuota carried");
    assert.equal(metrics.released, 2);
  });

  it("reports the longest wait of the last minute as waitTime.maxMs, not the longest since start", async () => {
    const { client, clock, factory } = setup();
    let grant: () => void = () => {};
    client.answer = () => new Promise<void>((resolve) => (grant = resolve));
    const api = factory.getThrottlerOrThrow("api");
    const waited = api.throttle(1);
    await clock.advance(500);
    grant();
    await waited;
    assert.equal(api.metrics().waitTime.maxMs, 500);
    await clock.advance(120_000);
    const { maxMs, count } = api.metrics().waitTime;
    assert.deepEqual({ maxMs, count }, { maxMs: 0, count: 1 });
  });

  it("fails with RETRIES_EXHAUSTED once retry_attempts are spent", async () => {
    const { client, clock, factory } = setup({
      throttlers: { api: { limit: 10, retrying_channel: { retry_attempts: 3, min_backoff: "10ms", max_backoff: "10ms" } } },
    });
    client.answer = () => {
      throw new SluiceError("CONTROLLER_UNAVAILABLE", "connection refused");
    };
    const failed = assert.rejects(
      factory.getThrottlerOrThrow("api").throttle(1),
      (e: unknown) => isSluiceError(e, "RETRIES_EXHAUSTED") && /failed 3 times.*retry_attempts 3.*connection refused/.test(e.message),
    );
    await clock.advance(1000);
    await failed;
  });

  it("fails with RETRIES_EXHAUSTED once retry_timeout is spent", async () => {
    const { client, clock, factory } = setup({
      throttlers: { api: { limit: 10, retrying_channel: { retry_timeout: "2s", min_backoff: "500ms", max_backoff: "500ms", backoff_jitter: 0 } } },
    });
    client.answer = () => {
      throw new SluiceError("CONTROLLER_UNAVAILABLE", "connection refused");
    };
    const failed = assert.rejects(factory.getThrottlerOrThrow("api").throttle(1), (e: unknown) => isSluiceError(e, "RETRIES_EXHAUSTED"));
    await clock.advance(5000);
    await failed;
    assert.equal(client.calls.length, 4, "at 0, 500, 1000 and 1500 ms; the next would pass 2 s");
  });

  it("does not retry what can never pass", async () => {
    const { client, clock, factory } = setup();
    client.answer = () => {
      throw new SluiceError("INVALID_AMOUNT", "amount 1e300 exceeds the largest single request");
    };
    const failed = assert.rejects(factory.getThrottlerOrThrow("api").throttle(1), (e: unknown) => isSluiceError(e, "INVALID_AMOUNT"));
    await clock.advance(0);
    await failed;
    assert.equal(client.calls.length, 1);
  });

  it("close fails waiters and returns pooled quota", async () => {
    const { client, clock, factory } = setup();
    const api = factory.getThrottlerOrThrow("api");
    await api.throttle(1); // the first refill holds 1 unit; nothing left over
    client.answer = () => new Promise(() => {}); // the next refill never comes back
    const blocked = api.throttle(5);
    factory.close("job w1/Enricher/0 stopped (take a new handle from the context of a running job)");
    await assert.rejects(blocked, (e: unknown) => isSluiceError(e, "CANCELLED"));
    await clock.advance(0);
    // The truth: the job stopped. Not "no longer declared… add it back", which no reconfiguration fixes.
    const stopped = (e: unknown) =>
      isSluiceError(e, "CANCELLED") &&
      e.message ===
        'CANCELLED: throttler "api" (computation "Enricher"): job w1/Enricher/0 stopped (take a new handle from the context of a running job); this handle no longer serves calls';
    await assert.rejects(api.throttle(1), stopped);
    assert.throws(() => api.tryAcquire(1), stopped);
    assert.throws(() => api.release(1), stopped);
    factory.reconfigure(dynamicSpec(base));
    await assert.rejects(api.throttle(1), stopped, "a reconfiguration after the stop does not bring it back");
  });

  describe("a throttler removed from dynamic_spec", () => {
    it("ends its waiting callers at once with THROTTLER_REMOVED, without spending the retry budget", async () => {
      const { client, clock, factory } = setup();
      client.answer = (call) => (call.throttlerId === "api" ? new Promise(() => {}) : undefined); // api never grants
      const api = factory.getThrottlerOrThrow("api");
      const outcome = api.throttle(1).then(
        () => "granted",
        (e: unknown) => e,
      );
      await clock.advance(0);
      const rpcs = client.calls.length;
      factory.reconfigure(dynamicSpec({ throttlers: { rows: base.throttlers.rows }, computations: {} }), 7);
      await clock.advance(0);
      const error = await Promise.race([outcome, clock.advance(1).then(() => "still waiting")]);
      assert.ok(isSluiceError(error, "THROTTLER_REMOVED"), `got ${String(error)}`);
      assert.equal(error.retriable, false);
      assert.equal(
        error.message,
        'THROTTLER_REMOVED: throttler "api" was removed: dynamic_spec version 7 no longer declares it (computation "Enricher"); not retried: declare it again with `sluice reconfigure` to use it',
      );
      await clock.advance(60_000);
      assert.equal(client.calls.length, rpcs, "no RPC after the removal");
      // A new call on the handle: not declared (until it is declared again).
      await assert.rejects(api.throttle(1), (e: unknown) => isSluiceError(e, "THROTTLER_NOT_DECLARED"));
    });

    it("also ends the callers still waiting on a client that a config change had replaced", async () => {
      const { client, clock, factory } = setup();
      client.answer = (call) => (call.throttlerId === "api" ? new Promise(() => {}) : undefined);
      const api = factory.getThrottlerOrThrow("api");
      const onOld = api.throttle(1).then(
        () => "granted",
        (e: unknown) => e,
      );
      await clock.advance(0);
      // request_period changes: a new client; the old one keeps its waiter until it is served
      factory.reconfigure(dynamicSpec({ ...base, throttlers: { ...base.throttlers, api: { limit: 10, request_period: "2s" } } }), 2);
      const onNew = api.throttle(1).then(
        () => "granted",
        (e: unknown) => e,
      );
      await clock.advance(0);
      factory.reconfigure(dynamicSpec({ throttlers: { rows: base.throttlers.rows }, computations: {} }), 3);
      await clock.advance(0);
      const results = await Promise.race([Promise.all([onOld, onNew]), clock.advance(1).then(() => ["still waiting"])]);
      assert.deepEqual(
        results.map((e) => (isSluiceError(e) ? e.code : e)),
        ["THROTTLER_REMOVED", "THROTTLER_REMOVED"],
      );
    });

    it("fails at once when the controller answers THROTTLER_REMOVED (the watch may lag behind)", async () => {
      const { client, clock, factory } = setup();
      client.answer = () => {
        throw new SluiceError("THROTTLER_REMOVED", 'throttler "api" was removed from dynamic_spec in version 2');
      };
      const failed = assert.rejects(factory.getThrottlerOrThrow("api").throttle(1), (e: unknown) => isSluiceError(e, "THROTTLER_REMOVED"));
      await clock.advance(0);
      await failed;
      assert.equal(client.calls.length, 1, "not retried");
    });

    it("rides out UNKNOWN_THROTTLER from a restarting controller while dynamic_spec still declares it", async () => {
      const { client, clock, factory } = setup({
        throttlers: { api: { limit: 10, retrying_channel: { min_backoff: "100ms", max_backoff: "100ms", backoff_jitter: 0 } } },
      });
      let unknownFor = 5;
      client.answer = () => {
        if (unknownFor-- > 0) throw new SluiceError("UNKNOWN_THROTTLER", 'throttler "api" is not declared on this controller (dynamic_spec version 1)');
      };
      let done = false;
      const waiting = factory
        .getThrottlerOrThrow("api")
        .throttle(1)
        .then(() => (done = true));
      await clock.advance(450);
      assert.equal(done, false, "still retrying");
      await clock.advance(100);
      await waiting;
      assert.equal(new Set(client.calls.slice(0, 6).map((c) => c.requestId)).size, 1, "one request id across the retries");
    });
  });
});
