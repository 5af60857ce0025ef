import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, isSluiceError } from "@sluice/core";
import type { CallContext, DynamicSpecUpdate } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";

// The controller in virtual time: reconfiguration, observed rates, shutdown. Transport behaviour is
// covered by the contract suite.

function controllerWith(throttlers: Record<string, unknown>, clock = new ManualClock(1_700_000_000_000)) {
  const parsed = validateDynamicSpec({ throttlers }, { computations: ["Enricher"] });
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  const lines: string[] = [];
  const controller = new Controller({ dynamicSpec: parsed.value, computations: ["Enricher"], clock, log: (line) => lines.push(line) });
  return { controller, clock, lines };
}

function context(overrides: Partial<CallContext> = {}): CallContext {
  return { deadlineAt: null, signal: new AbortController().signal, metadata: {}, ...overrides };
}

const ask = (controller: Controller, throttlerId: string, amount: number, requestId = "") =>
  controller.requestQuota({ throttlerId, clientId: "c", amount, timestampMs: 0, quotaClassId: "", requestId }, context());

describe("Controller (virtual time)", () => {
  it("applies a dynamic_spec atomically: reconfigures, adds, removes, bumps the version and logs one line", async () => {
    const { controller, clock, lines } = controllerWith({ api: { limit: 10, period: "1s" }, old: { limit: 0 } });
    assert.equal(controller.describeLimits(), "api=10/s, old=0/s");
    const stranded = ask(controller, "old", 1, "stranded");
    await clock.advance(0);
    const { version } = await controller.updateDynamicSpec(JSON.stringify({ throttlers: { api: { limit: 20, period: "1s" }, fresh: {} } }), context());
    assert.equal(version, 2);
    assert.equal(controller.version, 2);
    await assert.rejects(stranded, {
      message:
        'THROTTLER_REMOVED: throttler "old" was removed from dynamic_spec in version 2; not retried: declare it again with `sluice reconfigure` to use it',
    });
    assert.deepEqual(lines, ["dynamic_spec version 2 applied: 2 throttlers (api=20/s, fresh=unlimited); added fresh; removed old; changed api"]);
    assert.deepEqual(await ask(controller, "fresh", 1e6), { granted: 1e6, waitedMs: 0 });
    await assert.rejects(ask(controller, "old", 1), (error: unknown) => isSluiceError(error, "THROTTLER_REMOVED"));
    await controller.updateDynamicSpec(JSON.stringify({ throttlers: { api: { limit: 20, period: "1s" } } }), context());
    await assert.rejects(ask(controller, "old", 1), {
      message: /^THROTTLER_REMOVED: throttler "old" was removed from dynamic_spec in version 2 \(now version 3\)/,
    });
    assert.deepEqual(
      controller.snapshot().throttlers.map((t) => [t.id, t.limit]),
      [["api", 20]],
    );
    controller.close();
  });

  it("refuses a dynamic_spec that removes a throttler dynamic_spec.computations still names; the throttler keeps serving", async () => {
    const parsed = validateDynamicSpec(
      { throttlers: { api: { limit: 10, period: "1s" } }, computations: { Enricher: { input_rows_throttler_id: "api" } } },
      { computations: ["Enricher"] },
    );
    assert.ok(parsed.ok);
    const clock = new ManualClock(1_700_000_000_000);
    const controller = new Controller({ dynamicSpec: parsed.value, computations: ["Enricher"], clock });
    const removing = JSON.stringify({ throttlers: {}, computations: { Enricher: { input_rows_throttler_id: "api" } } });
    await assert.rejects(controller.updateDynamicSpec(removing, context()), (error: unknown) => {
      assert.ok(isSluiceError(error, "SPEC_INVALID"), String(error));
      assert.match(error.message, /nothing changed, version 1 stays in force/);
      assert.match(error.message, /dynamic_spec\.computations\.Enricher\.input_rows_throttler_id: throttler "api" is not declared in dynamic_spec\.throttlers/);
      return true;
    });
    assert.equal(controller.version, 1);
    assert.deepEqual(await ask(controller, "api", 1), { granted: 1, waitedMs: 0 });
    controller.close();
  });

  it("reports the granted rate of each throttler and class over the last 5 s", async () => {
    const { controller, clock } = controllerWith({ api: { limit: 100, period: "1s", classes: { gold: { weight: 1 } } } });
    // 100 units at once (the full bucket), then 10 per 100 ms for 4 s: 100 + 400 granted in 4 s.
    await ask(controller, "api", 100);
    for (let i = 0; i < 40; i++) {
      const grant = controller.requestQuota(
        { throttlerId: "api", clientId: "c", amount: 10, timestampMs: 0, quotaClassId: "gold", requestId: `g${i}` },
        context(),
      );
      await clock.advance(100);
      await grant;
    }
    const api = controller.snapshot().throttlers[0];
    assert.ok(api);
    assert.ok(Math.abs(api.grantedRate - 500 / 5) < 3, `granted rate ${api.grantedRate}/s`);
    const gold = api.classes.find((c) => c.id === "gold");
    assert.ok(gold && Math.abs(gold.grantedRate - 400 / 5) < 3, `gold rate ${gold?.grantedRate}/s`);
    await clock.advance(6_000);
    assert.equal(controller.snapshot().throttlers[0]?.grantedRate, 0, "nothing granted in the last 5 s");
    controller.close();
  });

  it("describes version, time and every throttler as JSON", async () => {
    const { controller } = controllerWith({ api: { limit: 10, period: "2s", max_grant_amount: 5, max_queue_size: 7 } });
    const snapshot = JSON.parse((await controller.describeThrottlers(context())).snapshotJson) as ReturnType<Controller["snapshot"]>;
    assert.equal(snapshot.version, 1);
    assert.equal(snapshot.generatedAt, "2023-11-14T22:13:20.000Z");
    assert.deepEqual(
      [snapshot.throttlers[0]?.id, snapshot.throttlers[0]?.capacity, snapshot.throttlers[0]?.maxGrantAmount, snapshot.throttlers[0]?.maxQueueSize],
      ["api", 20, 5, 7],
    );
    controller.close();
  });

  it("close() fails waiters, ends watch streams with CONTROLLER_UNAVAILABLE, refuses later calls, and is idempotent", async () => {
    const { controller, clock } = controllerWith({ api: { limit: 0 } });
    const waiting = ask(controller, "api", 1);
    const updates: DynamicSpecUpdate[] = [];
    const watching = controller.watchDynamicSpec("w", (update) => updates.push(update), context());
    assert.deepEqual(
      updates.map((u) => u.version),
      [1],
      "the current version at once",
    );
    await clock.advance(10);
    controller.close();
    controller.close();
    const expected = /^CONTROLLER_UNAVAILABLE: the controller is shutting down; retry against the restarted controller$/;
    await assert.rejects(waiting, { message: expected });
    await assert.rejects(watching, { message: expected });
    await assert.rejects(controller.updateDynamicSpec("{}", context()), { message: expected });
    assert.equal(controller.closed, true);
    assert.equal(clock.pendingTimers, 0, "no timer left behind");
  });

  it("a watch ends quietly when its caller goes away", async () => {
    const { controller } = controllerWith({ api: {} });
    const abort = new AbortController();
    const watching = controller.watchDynamicSpec("w", () => {}, context({ signal: abort.signal }));
    abort.abort();
    await watching;
    controller.close();
  });
});

describe("Controller.updateDynamicSpec with text that is not JSON", () => {
  it("refuses it with SPEC_INVALID and the line and column, however deeply nested", async () => {
    const { controller } = controllerWith({ api: { limit: 10 } });
    const refusal = async (text: string) => {
      const error: unknown = await controller.updateDynamicSpec(text).then(
        () => assert.fail(`accepted ${text.slice(0, 40)}`),
        (caught: unknown) => caught,
      );
      assert.ok(isSluiceError(error, "SPEC_INVALID"), String(error));
      return error.message;
    };
    assert.match(await refusal('{"a": }'), /^SPEC_INVALID: dynamic_spec_json is not valid JSON at line 1, column 7 \(/);
    assert.match(await refusal('{\n  "a": 1,\n}'), /at line 3, column 1 \(.*JSON allows no trailing comma\); nothing changed, version 1 stays in force$/);
    // Each of these overflowed the stack of the recursive scanner that located errors before.
    assert.match(await refusal("[".repeat(200_000)), /at line 1, column 200001 \(/);
    assert.match(await refusal('{"a":'.repeat(200_000)), /at line 1, column 1000001 \(/);
    assert.match(await refusal(`${"[".repeat(200_000)}}`), /at line 1, column 200001 \(/);
    assert.equal(controller.version, 1);
  });
});
