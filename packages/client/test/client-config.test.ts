import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { throttlerSpecSchema, validateDynamicSpec, type ThrottlerSpecInput } from "@sluice/spec";
import { clientConfigEquals, prefetchWindow, smoothPrefetchWindow } from "../src/client-config.ts";

const throttler = (input: ThrottlerSpecInput) => throttlerSpecSchema.parse(input);

describe("prefetchWindow (ytflow.md §2.1)", () => {
  it("with all defaults: 0.2 RPS, 50 s window, 1e9 cap when unlimited", () => {
    assert.deepEqual(prefetchWindow(throttler({})), {
      targetRps: 0.2,
      minPrefetchAmount: 1,
      maxPrefetchAmount: 1e9,
      windowMs: 50_000,
      unbounded: true,
    });
  });

  it("caps a refill at ceil(limit × request_period), independent of period", () => {
    const window = prefetchWindow(throttler({ limit: 100, period: "1m", request_period: "500ms" }));
    assert.deepEqual(window, { targetRps: 2, minPrefetchAmount: 1, maxPrefetchAmount: 50, windowMs: 5_000, unbounded: false });
    assert.equal(prefetchWindow(throttler({ limit: 7, request_period: "300ms" })).maxPrefetchAmount, 3);
  });

  it("never caps below 1 and never uses a window under 1 s", () => {
    const window = prefetchWindow(throttler({ limit: 0.1, request_period: "50ms" }));
    assert.equal(window.maxPrefetchAmount, 1);
    assert.equal(window.windowMs, 1_000);
    assert.equal(prefetchWindow(throttler({ limit: 0 })).maxPrefetchAmount, 1);
  });

  it("uses the summed class weights as the limit", () => {
    const spec = throttler({ use_class_weights_as_limit: true, request_period: "2s", classes: { a: { weight: 3 }, b: { weight: 2 } } });
    assert.equal(prefetchWindow(spec).maxPrefetchAmount, 10);
  });

  it("sizes an adaptive throttler's prefetch by initial_limit, not by max_limit", () => {
    const result = validateDynamicSpec({
      throttlers: {
        tasks: {
          request_period: "1s",
          adaptive: {
            load: { prometheus: { url: "http://127.0.0.1:9090", query: "cpu" } },
            target: { low: 0.9, high: 0.95 },
            max_limit: 100,
            initial_limit: 4,
          },
        },
      },
    });
    assert.ok(result.ok);
    const adaptive = result.value.throttlers["tasks"];
    assert.ok(adaptive);
    assert.equal(prefetchWindow(adaptive).maxPrefetchAmount, 4);
  });
});

describe("smoothPrefetchWindow (docs/design.md §11.1)", () => {
  it("caps a smooth client's answers at max_grant_amount, since the controller cannot chunk a run of slots", () => {
    assert.equal(smoothPrefetchWindow(throttler({ limit: 100, request_period: "1s", smooth: true })).maxPrefetchAmount, 100);
    assert.equal(smoothPrefetchWindow(throttler({ limit: 100, request_period: "1s", smooth: true, max_grant_amount: 7 })).maxPrefetchAmount, 7);
    assert.equal(smoothPrefetchWindow(throttler({ limit: 2, request_period: "1s", smooth: true, max_grant_amount: 7 })).maxPrefetchAmount, 2);
  });

  it("spans at most a second of slots per answer (the controller's start gap is one answer long)", () => {
    const window = smoothPrefetchWindow(throttler({ limit: 10, smooth: true }));
    assert.equal(window.maxPrefetchAmount, 10, "request_period 5 s (the default) at limit 10: 10 slots, not 50");
    assert.equal(window.targetRps, 0.2, "the refill rate it aims at stays one per request_period");
    assert.equal(smoothPrefetchWindow(throttler({ limit: 1000, request_period: "500ms", smooth: true })).maxPrefetchAmount, 500);
  });

  it("aims at one refill per request_period or per second, whichever is longer (each RPC costs wake-ups on both sides)", () => {
    const fast = smoothPrefetchWindow(throttler({ limit: 1000, request_period: "500ms", smooth: true }));
    assert.equal(fast.targetRps, 1, "request_period 500 ms: one refill a second, answers twice as long, still within the cap");
    assert.equal(fast.maxPrefetchAmount, 500);
    assert.equal(smoothPrefetchWindow(throttler({ limit: 1000, request_period: "2s", smooth: true })).targetRps, 0.5);
    assert.equal(prefetchWindow(throttler({ limit: 1000, request_period: "500ms" })).targetRps, 2, "a plain client keeps one per request_period");
  });

  it("rebuilds a smooth client when max_grant_amount changes its cap, not a plain one", () => {
    const smooth: ThrottlerSpecInput = { limit: 100, request_period: "1s", smooth: true };
    assert.equal(clientConfigEquals(throttler(smooth), throttler({ ...smooth, max_grant_amount: 10 })), false);
    assert.equal(
      clientConfigEquals(throttler(smooth), throttler({ ...smooth, max_grant_amount: 500 })),
      true,
      "a cap above limit × request_period changes nothing",
    );
    assert.equal(clientConfigEquals(throttler({ limit: 100 }), throttler({ limit: 100, max_grant_amount: 10 })), true);
  });
});

describe("clientConfigEquals (docs/design.md §9.9)", () => {
  const base: ThrottlerSpecInput = { limit: 100, period: "1s", request_period: "1s", classes: { a: { weight: 1 } } };
  const equalAfter = (change: ThrottlerSpecInput) => clientConfigEquals(throttler(base), throttler({ ...base, ...change }));

  it("keeps the client when only controller-side fields change", () => {
    assert.equal(equalAfter({}), true);
    assert.equal(equalAfter({ period: "10s" }), true);
    assert.equal(equalAfter({ classes: { a: { weight: 5 }, b: {} } }), true);
    assert.equal(equalAfter({ max_grant_amount: 10 }), true);
    assert.equal(equalAfter({ max_queue_size: 5 }), true);
  });

  it("rebuilds the client when its own config changes", () => {
    assert.equal(equalAfter({ limit: 200 }), false);
    assert.equal(equalAfter({ limit: null }), false);
    assert.equal(equalAfter({ request_period: "2s" }), false);
    assert.equal(equalAfter({ rpc_timeout: "5s" }), false);
    assert.equal(equalAfter({ retrying_channel: { retry_attempts: 3 } }), false);
    assert.equal(equalAfter({ retrying_channel: { backoff_jitter: 0 } }), false);
    // A smooth client paces what it hands out; a plain one hands a refill out at once.
    assert.equal(equalAfter({ smooth: true }), false);
  });

  it("does not rebuild for a limit change that keeps the prefetch cap", () => {
    // ceil(100.2 × 1 s) = 101 ≠ 100, but ceil(99.5 × 1 s) = 100.
    assert.equal(equalAfter({ limit: 99.5 }), true);
    assert.equal(equalAfter({ limit: 100.2 }), false);
  });

  it("under use_class_weights_as_limit, rebuilds only if a weight change resizes the window", () => {
    const weighted = (weight: number) => throttler({ use_class_weights_as_limit: true, request_period: "1s", classes: { a: { weight } } });
    assert.equal(clientConfigEquals(weighted(3.2), weighted(3.4)), true);
    assert.equal(clientConfigEquals(weighted(3.2), weighted(4.5)), false);
  });
});
