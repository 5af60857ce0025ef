// docs/design.md §9.8 and §5.3: a caller's AbortSignal ends its throttle() promptly even while the controller
// is unreachable — each RequestQuota failing retriably (refused connections, a follower) or hanging
// until its rpc_timeout — on every kind of client connectThrottlers builds: prefetching (rate),
// smooth (paced) and concurrency. The rejection is CANCELLED, and the wait is bounded by 1 s
// (the abort comes 100 ms in; the bound is generous for a loaded machine, the retry budget is minutes).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSluiceError, SluiceError } from "@sluice/core";
import type { CallOptions, RequestQuotaCall } from "@sluice/protocol";
import { connectThrottlers } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

const common = { request_period: "200ms", rpc_timeout: "20s", retrying_channel: { retry_attempts: 1000, retry_timeout: "10m" } };
const SPEC = JSON.stringify({
  throttlers: {
    rate: { limit: 40, period: "1s", ...common },
    smooth: { limit: 40, period: "1s", smooth: true, ...common },
    slots: { kind: "concurrency", limit: 4, ...common },
  },
});

/** A controller group that answers the dynamic_spec watch but never grants: every RequestQuota fails or hangs. */
class UnreachableController extends FakeQuotaClient {
  constructor(private readonly mode: "refused" | "hanging") {
    super();
    this.dynamicSpecJson = SPEC;
  }

  override async requestQuota(call: RequestQuotaCall, options?: CallOptions) {
    this.calls.push(call);
    if (this.mode === "refused") {
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw new SluiceError("CONTROLLER_UNAVAILABLE", "connect ECONNREFUSED (scripted)");
    }
    // Hangs like a call to a paused controller: only its deadline or its signal ends it.
    return await new Promise<never>((_resolve, reject) => {
      const signal = options?.signal;
      const timer = setTimeout(
        () => reject(new SluiceError("CONTROLLER_UNAVAILABLE", "deadline (scripted)")),
        Math.max(0, (options?.deadlineAt ?? Date.now()) - Date.now()),
      );
      signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(new SluiceError("CANCELLED", "cancelled (scripted)"));
        },
        { once: true },
      );
    });
  }
}

const BOUND_MS = 1_000;

for (const mode of ["refused", "hanging"] as const) {
  describe(`throttle() while every RequestQuota is ${mode}`, () => {
    for (const id of ["rate", "smooth", "slots"]) {
      it(`on a ${id} throttler rejects with CANCELLED within ${BOUND_MS} ms of its signal aborting`, async () => {
        const controller = new UnreachableController(mode);
        const throttlers = await connectThrottlers({ controller: "127.0.0.1:1", clientId: "c1", log: null, connect: () => controller });
        try {
          const handle = throttlers.getThrottlerOrThrow(id);
          const abort = new AbortController();
          const pending = handle.throttle(1, { signal: abort.signal });
          const outcome = pending.then(
            () => "granted",
            (error: unknown) => error,
          );
          await new Promise((resolve) => setTimeout(resolve, 100));
          const abortedAt = Date.now();
          abort.abort(new Error("the caller's deadline"));
          const timeout = new Promise((resolve) => setTimeout(() => resolve("still waiting"), 10_000).unref());
          const result = await Promise.race([outcome, timeout]);
          const lateMs = Date.now() - abortedAt;
          assert.ok(isSluiceError(result) && result.code === "CANCELLED", `expected CANCELLED, got ${String(result)}`);
          assert.ok(lateMs < BOUND_MS, `answered ${lateMs} ms after the abort (bound ${BOUND_MS} ms)`);
          assert.ok(controller.calls.length >= 1, "the throttle() asked the controller");
        } finally {
          await throttlers.close();
        }
      });
    }
  });
}
