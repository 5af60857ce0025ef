// slow: 100,000 requests, one per key (scripts/run-test-files.mjs)
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";

// docs/design.md §11.4 / issue 23: 100,000 keys live on one controller at ≤ 300 B of heap per idle key. Each
// key is created by a real request through the controller, then left idle (parked as its balance,
// not forgotten: idle_timeout is far away). The heap is measured after a full collection.

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const KEYS = 100_000;
const BATCH = 10_000;
const MAX_BYTES_PER_IDLE_KEY = 300;

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });

function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe("keyed throttler memory", () => {
  it(`holds ${KEYS} idle keys at ≤ ${MAX_BYTES_PER_IDLE_KEY} B of heap each`, async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const parsed = validateDynamicSpec({ throttlers: { per_customer: { limit: 10, period: "1s", keyed: { max_keys: KEYS, idle_timeout: "1h" } } } });
    assert.ok(parsed.ok);
    const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock });
    const before = heapUsed();
    for (let start = 0; start < KEYS; start += BATCH) {
      for (let i = start; i < start + BATCH; i++) {
        // Half the keys owe something when they go idle: a parked balance must be kept, not assumed full.
        await controller.requestQuota(
          { throttlerId: "per_customer", clientId: "w1", amount: i % 2 === 0 ? 1 : 15, timestampMs: 0, quotaClassId: "", requestId: "", key: `customer-${i}` },
          context(),
        );
      }
      await clock.advance(61_000); // past the parking delay: the batch's buckets become balances
    }
    const keyed = controller.snapshot().throttlers.find((t) => t.id === "per_customer")?.keyed;
    assert.equal(keyed?.keys, KEYS, "every key is live");
    assert.equal(keyed?.activeKeys, 0, "every key is idle (parked)");
    const perKey = (heapUsed() - before) / KEYS;
    console.log(`keyed memory: ${KEYS} idle keys, ${perKey.toFixed(1)} B of heap per idle key (key strings of ~14 characters included)`);
    assert.ok(perKey <= MAX_BYTES_PER_IDLE_KEY, `${perKey.toFixed(1)} B per idle key`);
    controller.close();
  });
});
