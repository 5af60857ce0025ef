import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller, writeControllerMetrics } from "../src/index.ts";
import { PrometheusText } from "@sluice/status-http";

// A concurrency throttler in the controller, in virtual time: leases per client, releases checked
// against what the client holds, renewal, and units of a silent holder coming back after lease_timeout.

function setup(throttler: Record<string, unknown>) {
  const clock = new ManualClock(1_700_000_000_000);
  const parsed = validateDynamicSpec({ throttlers: { tasks: { kind: "concurrency", ...throttler } } });
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  const lines: string[] = [];
  const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock, log: (line) => lines.push(line) });
  const tasks = () => {
    const t = controller.snapshot().throttlers.find((x) => x.id === "tasks");
    assert.ok(t);
    return t;
  };
  return { clock, controller, lines, tasks };
}

const context = (signal = new AbortController().signal): CallContext => ({ deadlineAt: null, signal, metadata: {} });
const ask = (controller: Controller, clientId: string, amount: number) =>
  controller.requestQuota({ throttlerId: "tasks", clientId, amount, timestampMs: 0, quotaClassId: "", requestId: "" }, context());
const release = (controller: Controller, clientId: string, amount: number) =>
  controller.releaseQuota({ throttlerId: "tasks", clientId, amount, quotaClassId: "" }, context());

describe("concurrency throttler in the controller (virtual time)", () => {
  it("admits limit units at once; a release by the holder lets the next one in; a stranger's release frees nothing", async () => {
    const { clock, controller, tasks } = setup({ limit: 2 });
    await ask(controller, "a", 1);
    await ask(controller, "b", 1);
    let third = false;
    const waiting = ask(controller, "c", 1).then(() => (third = true));
    await clock.advance(1_000);
    assert.equal(third, false);
    assert.equal(tasks().inUse, 2);
    assert.equal(tasks().concurrency?.holders, 2);
    await release(controller, "stranger", 1);
    await clock.advance(10);
    assert.equal(third, false, "a client that holds nothing cannot free units");
    await release(controller, "a", 1);
    await waiting;
    assert.equal(tasks().inUse, 2);
    controller.close();
  });

  it("refuses at once a request larger than the limit, with the figures", async () => {
    const { controller } = setup({ limit: 3 });
    await assert.rejects(ask(controller, "a", 4), {
      message:
        'INVALID_AMOUNT: throttler "tasks" is a concurrency throttler with limit 3: a request for 4 units at once can never pass; ask for at most 3 units',
    });
    controller.close();
  });

  it("gives a silent holder's units back after lease_timeout; a renewing holder keeps them", async () => {
    const { clock, controller, lines, tasks } = setup({ limit: 3, lease_timeout: "2s" });
    await ask(controller, "crashed", 2);
    await ask(controller, "alive", 1);
    for (let i = 0; i < 8; i++) {
      await clock.advance(500);
      await controller.renewLeases({ clientId: "alive", throttlerIds: ["tasks"] }, context());
    }
    const t = tasks();
    assert.equal(t.inUse, 1, "the crashed holder's 2 units came back, the renewing holder's 1 stayed");
    assert.equal(t.concurrency?.expiredLeases, 1);
    assert.equal(t.concurrency?.expiredUnits, 2);
    assert.ok(
      lines.some((l) => l.startsWith('concurrency tasks: lease of "crashed" ended without renewal (lease_timeout 2000ms); 2 units given back')),
      lines.join("\n"),
    );
    const metrics = new PrometheusText();
    writeControllerMetrics(metrics, controller.snapshot());
    const text = await metrics.render();
    assert.match(text, /sluice_controller_throttler_in_use\{throttler_id="tasks"\} 1/);
    assert.match(text, /sluice_controller_throttler_expired_leases_total\{throttler_id="tasks"\} 1/);
    assert.match(text, /sluice_controller_throttler_holders\{throttler_id="tasks"\} 1/);
    // A late release from the crashed holder frees nothing that "alive" holds.
    await release(controller, "crashed", 2);
    assert.equal(tasks().inUse, 1);
    controller.close();
  });

  it("an adaptive concurrency throttler runs at the loop's limit; a request above max_limit is refused", async () => {
    const { controller, tasks } = setup({
      adaptive: { load: { module: "./none.ts" }, target: { low: 0.5, high: 0.6 }, initial_limit: 2, max_limit: 5 },
    });
    assert.equal(tasks().limit, 2);
    await assert.rejects(ask(controller, "a", 6), /max_limit 5 of its adaptive limit: a request for 6 units/);
    controller.close();
  });
});
