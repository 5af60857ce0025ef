// The Throttler contract (test/support/throttler-contract.ts) over every implementation behind a
// throttler handle: the local bucket (embedded quota), and the prefetching, paced (smooth) and
// concurrency clients of DistributedThrottlerFactory, served by a real Controller over the
// in-memory transport (what `sluice run` uses).
import type { TestContext } from "node:test";
import { DistributedThrottlerFactory } from "@sluice/client";
import { LocalThrottler, QuotaBucketDriver, quotaBucketConfig, systemClock, type Throttler } from "@sluice/core";
import { Controller } from "@sluice/controller";
import { createInMemoryQuotaClient } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { throttlerContract } from "../support/throttler-contract.ts";

const COMPUTATIONS = ["C"];

function local(limit: number): Throttler {
  return new LocalThrottler(new QuotaBucketDriver("t", quotaBucketConfig({ limit, periodMs: 1_000 }), systemClock), { clientId: "local" });
}

/** The handle of throttler `t` as a job gets it, with `t` declared as `spec`. */
function remote(t: TestContext, spec: Record<string, unknown>): Throttler {
  const parsed = validateDynamicSpec({ throttlers: { t: spec } }, { computations: COMPUTATIONS });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const controller = new Controller({ dynamicSpec: parsed.value, computations: COMPUTATIONS, clock: systemClock });
  const client = createInMemoryQuotaClient(controller);
  const factory = new DistributedThrottlerFactory({ computation: "C", clientId: "w1/C/0", client: () => client, clock: systemClock });
  factory.reconfigure(parsed.value);
  t.after(async () => {
    factory.close("test over");
    await client.close();
    controller.close();
  });
  return factory.getThrottlerOrThrow("t");
}

throttlerContract("local bucket", { open: async () => local(1_000), closed: async () => local(0) });
throttlerContract("prefetching client", {
  open: async (t) => remote(t, { limit: 1_000, request_period: "1s" }),
  closed: async (t) => remote(t, { limit: 0, request_period: "1s" }),
});
throttlerContract("paced client (smooth)", {
  open: async (t) => remote(t, { limit: 1_000, smooth: true }),
  closed: async (t) => remote(t, { limit: 0, smooth: true }),
});
throttlerContract("concurrency client", {
  open: async (t) => remote(t, { kind: "concurrency", limit: 1_000, lease_timeout: "30s" }),
  // At limit 0 a concurrency throttler refuses at once what it could never hold (INVALID_AMOUNT,
  // by design): "nothing available now" is its one unit already in use.
  closed: async (t) => {
    const throttler = remote(t, { kind: "concurrency", limit: 1, lease_timeout: "30s" });
    await throttler.throttle(1);
    return throttler;
  },
});
