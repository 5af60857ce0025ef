// own process: it registers OpenTelemetry's global tracer provider
// A whole pipeline in one process with a real controller (in-memory transport), a real clock and the
// OpenTelemetry SDK: the Input.Throttle spans account for the throttling that happened.
import assert from "node:assert/strict";
import { after, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { systemClock } from "@sluice/core";
import { Controller } from "@sluice/controller";
import { createInMemoryQuotaClient } from "@sluice/protocol";
import { defineComputation, MemoryIoFactory, Worker } from "@sluice/runtime";
import { validatePipelineSpec } from "@sluice/spec";

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
after(() => provider.shutdown());

it("Input.Throttle spans add up to the wait the limit imposes", async () => {
  const parsed = validatePipelineSpec({
    pipeline: "traced",
    streams: { input: { topic: "input" }, out: { topic: "out" } },
    computations: { Relay: { module: "./unused.ts", inputs: ["input"], outputs: ["out"], max_rows_per_batch: 50 } },
    dynamic_spec: {
      throttlers: { rows: { limit: 200, period: "1s", request_period: "100ms" } },
      computations: { Relay: { input_rows_throttler_id: "rows" } },
    },
  });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const spec = parsed.value;
  const controller = new Controller({ dynamicSpec: spec.dynamic_spec, computations: ["Relay"], clock: systemClock });
  const client = createInMemoryQuotaClient(controller);
  const io = new MemoryIoFactory(spec);
  for (let i = 0; i < 600; i++) io.log.append("input", { key: null, value: new TextEncoder().encode(String(i)), timestampMs: Date.now() });
  const worker = new Worker({
    pipeline: spec,
    specDir: "/nowhere",
    io,
    quotaClient: () => client,
    workerId: "w",
    loaded: {
      Relay: defineComputation({
        process(batch, ctx) {
          for (const m of batch.messages) ctx.emit("out", { value: m.value });
        },
      }),
    },
    log: { info: () => {}, warn: () => {}, error: () => {} },
  });
  exporter.reset();
  const startedAt = Date.now();
  await worker.start();
  while ((worker.stats()[0]?.rows ?? 0) < 600) {
    assert.ok(Date.now() - startedAt < 15_000, "600 rows at 200/s take about 2 s");
    await new Promise((r) => setTimeout(r, 20));
  }
  const elapsedMs = Date.now() - startedAt;
  await worker.close();
  controller.close();
  client.close();

  const throttles = exporter.getFinishedSpans().filter((s) => s.name === "Input.Throttle");
  assert.equal(throttles.length, 12, "600 rows in iterations of 50");
  const waits = throttles.map((s) => Number(s.attributes["sluice.throttle.wait_ms"]));
  const totalWaitMs = waits.reduce((a, b) => a + b, 0);
  // 200 rows come from the full bucket at once; the other 400 at 200/s, the last refill granted as
  // soon as the balance is back to 0 (pay-after): between 1.5 and 2 s of waiting, allow ±10 % more.
  // A run longer than that (a loaded machine slowing the work between iterations, or timers firing
  // late) moves the waits by at most the extra time: the bounds give it back.
  const slackMs = Math.max(0, elapsedMs - 2200);
  assert.ok(
    totalWaitMs >= 1350 - slackMs && totalWaitMs <= 2200 + slackMs,
    `Σ Input.Throttle wait ${totalWaitMs} ms in a run of ${elapsedMs} ms, expected 1.5–2 s give or take ${slackMs} ms`,
  );
  assert.ok(totalWaitMs <= elapsedMs, "the waits happened within the run");
  assert.ok(elapsedMs >= 1400, `the pipeline took ${elapsedMs} ms: the limit was applied`);
  for (const span of throttles) {
    const durationMs = span.duration[0] * 1000 + span.duration[1] / 1e6;
    // wait_ms is the span's own duration: the clock reads around the same wait. The span starts a few
    // synchronous steps earlier (asking the throttlers), which a loaded machine can deschedule.
    const waitMs = Number(span.attributes["sluice.throttle.wait_ms"]);
    assert.ok(waitMs <= durationMs + 2 && durationMs - waitMs < 5 + 0.1 * durationMs, `wait_ms ${waitMs} in a span of ${durationMs.toFixed(1)} ms`);
    assert.equal(span.attributes["sluice.throttle.rows.amount"], 50);
  }
});
