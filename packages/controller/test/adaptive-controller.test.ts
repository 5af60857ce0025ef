import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller, writeControllerMetrics, type LoadReading, type LoadSource } from "../src/index.ts";
import { PrometheusText } from "@sluice/status-http";

// An adaptive throttler inside the controller, in virtual time, with a load source the test sets:
// the limit in force follows the loop, every change is logged with its reading, DescribeThrottlers
// and /metrics show load, band, limit in force and suggestion, and reconfiguration applies live.

const adaptive = (extra: Record<string, unknown> = {}) => ({
  load: { module: "./unused.ts" },
  target: { low: 0.9, high: 0.95 },
  initial_limit: 4,
  min_limit: 1,
  max_limit: 100,
  interval: "1s",
  ...extra,
});

function setup(extra: Record<string, unknown> = {}) {
  const clock = new ManualClock(1_700_000_000_000);
  let reading: LoadReading = { ok: true, load: 0.2 };
  const source: LoadSource = { description: "test load", read: async () => reading };
  const parsed = validateDynamicSpec({ throttlers: { tasks: { period: "1s", adaptive: adaptive(extra) } } });
  assert.ok(parsed.ok);
  const lines: string[] = [];
  const controller = new Controller({
    dynamicSpec: parsed.value,
    computations: [],
    clock,
    log: (line) => lines.push(line),
    loadSourceOf: () => source,
  });
  const tasks = () => {
    const t = controller.snapshot().throttlers.find((x) => x.id === "tasks");
    assert.ok(t);
    return t;
  };
  return { clock, controller, lines, tasks, setReading: (r: LoadReading) => (reading = r) };
}

/** Keeps the throttler busy: a request always waits, so the loop sees demand. */
function keepBusy(controller: Controller, stop: AbortSignal): void {
  void (async () => {
    while (!stop.aborted) {
      const call = { throttlerId: "tasks", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: "" };
      try {
        await controller.requestQuota(call, { deadlineAt: null, signal: stop, metadata: {} });
      } catch {
        return;
      }
    }
  })();
}

describe("adaptive throttler in the controller (virtual time)", () => {
  it("starts at initial_limit, raises while the load is low and demand exists, logs each change with its reading", async () => {
    const { clock, controller, lines, tasks } = setup();
    const stop = new AbortController();
    keepBusy(controller, stop.signal);
    assert.equal(tasks().limit, 4);
    await clock.advance(1_000);
    await clock.advance(0);
    assert.equal(tasks().limit, 6);
    assert.equal(tasks().adaptive?.load, 0.2);
    assert.ok(
      lines.some((l) => /^adaptive tasks: raise limit 4 -> 6: load 0\.2 below \[0\.9, 0\.95\]/.test(l)),
      lines.join("\n"),
    );
    const metrics = new PrometheusText();
    writeControllerMetrics(metrics, controller.snapshot());
    const text = await metrics.render();
    assert.match(text, /sluice_controller_throttler_adaptive_load\{throttler_id="tasks"\} 0\.2/);
    assert.match(text, /sluice_controller_throttler_adaptive_target_low\{throttler_id="tasks"\} 0\.9/);
    assert.match(text, /sluice_controller_throttler_adaptive_suggested_limit\{throttler_id="tasks"\} 6/);
    assert.match(text, /sluice_controller_throttler_limit\{throttler_id="tasks"\} 6/);
    stop.abort();
    controller.close();
  });

  it("holds on failed readings, then falls back to min_limit; resumes when readings return", async () => {
    const { clock, controller, lines, tasks, setReading } = setup({ initial_limit: 20 });
    const stop = new AbortController();
    keepBusy(controller, stop.signal);
    setReading({ ok: false, reason: "Prometheus at http://127.0.0.1:1 did not answer" });
    await clock.advance(1_000);
    await clock.advance(1_000);
    assert.equal(tasks().limit, 20);
    await clock.advance(1_000);
    await clock.advance(0);
    assert.equal(tasks().limit, 1);
    assert.equal(tasks().adaptive?.counters.fallbacks, 1);
    assert.ok(
      lines.some((l) => l.includes("holding limit 20: no usable reading (Prometheus at http://127.0.0.1:1 did not answer; 1 in a row)")),
      lines.join("\n"),
    );
    setReading({ ok: true, load: 0.3 });
    await clock.advance(1_000);
    await clock.advance(0);
    assert.ok((tasks().limit ?? 0) > 1);
    stop.abort();
    controller.close();
  });

  it("dry_run moves only the suggestion; a live reconfigure that turns it off puts the suggestion in force", async () => {
    const { clock, controller, lines, tasks } = setup({ dry_run: true });
    const stop = new AbortController();
    keepBusy(controller, stop.signal);
    await clock.advance(1_000);
    await clock.advance(0);
    assert.equal(tasks().limit, 4);
    assert.equal(tasks().adaptive?.suggestedLimit, 6);
    assert.ok(lines.some((l) => l.includes("raise suggested limit 4 -> 6") && l.includes("(dry run: limit in force stays 4)")));
    await controller.updateDynamicSpec(JSON.stringify({ throttlers: { tasks: { period: "1s", adaptive: adaptive({ dry_run: false, max_limit: 5 }) } } }));
    assert.equal(tasks().limit, 5, "the suggestion 6, moved into the new bounds");
    assert.equal(tasks().adaptive?.maxLimit, 5);
    await controller.updateDynamicSpec(JSON.stringify({ throttlers: { tasks: { period: "1s", limit: 3 } } }));
    assert.equal(tasks().limit, 3);
    assert.equal(tasks().adaptive, undefined);
    assert.ok(lines.some((l) => l === "adaptive tasks: stopped (the throttler has a fixed limit now)"));
    stop.abort();
    controller.close();
  });
});
