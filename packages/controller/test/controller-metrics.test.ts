import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller, writeControllerMetrics } from "../src/index.ts";
import { PrometheusText } from "@sluice/status-http";

// The controller's families in virtual time: every figure follows from the requests made here.

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });

async function metricsOf(controller: Controller): Promise<Map<string, number>> {
  const out = new PrometheusText();
  writeControllerMetrics(out, controller.snapshot());
  const samples = new Map<string, number>();
  for (const line of (await out.render()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

describe("controller metrics", () => {
  it("report limits, grants, queues, waits and classes as they happened", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const parsed = validateDynamicSpec({ throttlers: { api: { limit: 10, period: "1s", classes: { gold: { weight: 3 } } }, free: {} } }, { computations: [] });
    assert.ok(parsed.ok);
    const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock });
    const ask = (amount: number, quotaClassId: string, requestId: string) =>
      controller.requestQuota({ throttlerId: "api", clientId: "c", amount, timestampMs: 0, quotaClassId, requestId }, context());

    await ask(4, "", "classless"); // from the full bucket of 10: balance 6
    await ask(8, "gold", "gold-1"); // pay-after: granted while the balance is positive; balance −2
    const waiting = ask(3, "silver", "unknown"); // an undeclared class → default; waits for the debt
    await clock.advance(0);

    let m = await metricsOf(controller);
    assert.equal(m.get('sluice_controller_throttler_limit{throttler_id="api"}'), 10);
    assert.equal(m.get('sluice_controller_throttler_limit{throttler_id="free"}'), -1, "unlimited is −1");
    assert.equal(m.get('sluice_controller_throttler_capacity{throttler_id="free"}'), undefined, "no capacity when unlimited");
    assert.equal(m.get('sluice_controller_throttler_balance{throttler_id="api"}'), -2);
    assert.equal(m.get('sluice_controller_throttler_granted_total{throttler_id="api"}'), 12);
    assert.equal(m.get('sluice_controller_throttler_queue_size{throttler_id="api"}'), 1);
    assert.equal(m.get('sluice_controller_throttler_queue_amount{throttler_id="api"}'), 3);
    assert.equal(m.get('sluice_controller_quota_class_pending_requests{throttler_id="api",quota_class="default"}'), 1);
    assert.equal(m.get('sluice_controller_quota_class_granted_total{throttler_id="api",quota_class="gold"}'), 8);
    assert.equal(m.get('sluice_controller_quota_class_granted_total{throttler_id="api",quota_class="default"}'), 4);
    assert.equal(m.get('sluice_controller_quota_class_weight{throttler_id="api",quota_class="gold"}'), 3);
    assert.equal(m.get('sluice_controller_throttler_classless_requests_total{throttler_id="api"}'), 1);
    assert.equal(m.get('sluice_controller_throttler_unknown_class_requests_total{throttler_id="api"}'), 1);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_count{throttler_id="api"}'), 2);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_bucket{throttler_id="api",le="1"}'), 2);

    // The debt of 2 is paid in 200 ms at 10/s; the third request waited exactly that long.
    await clock.advance(200);
    assert.deepEqual(await waiting, { granted: 3, waitedMs: 200 });
    m = await metricsOf(controller);
    assert.equal(m.get('sluice_controller_throttler_queue_size{throttler_id="api"}'), 0);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_count{throttler_id="api"}'), 3);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_bucket{throttler_id="api",le="100"}'), 2);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_bucket{throttler_id="api",le="250"}'), 3);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_sum{throttler_id="api"}'), 200);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_max{throttler_id="api"}'), 200);
    assert.equal(m.get('sluice_controller_quota_class_wait_time_ms_max{throttler_id="api",quota_class="default"}'), 200);

    await controller.releaseQuota({ throttlerId: "api", clientId: "c", amount: 2, quotaClassId: "gold" }, context());
    m = await metricsOf(controller);
    assert.equal(m.get('sluice_controller_throttler_released_total{throttler_id="api"}'), 2);
    assert.equal(m.get("sluice_controller_dynamic_spec_version"), 1);

    // `_max` is a recent maximum (the reference's wait_time.max): two minutes later the 200 ms wait
    // has left its window while the histogram keeps counting it.
    await clock.advance(120_000);
    m = await metricsOf(controller);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_max{throttler_id="api"}'), 0);
    assert.equal(m.get('sluice_controller_quota_class_wait_time_ms_max{throttler_id="api",quota_class="default"}'), 0);
    assert.equal(m.get('sluice_controller_throttler_wait_time_ms_count{throttler_id="api"}'), 3);
    controller.close();
  });
});
