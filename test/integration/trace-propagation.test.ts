// own process: it registers OpenTelemetry's global tracer provider
// Trace context across the quota RPC, without a trace backend: a worker and a controller in this
// process, each with its own tracer provider and in-memory exporter (the worker's registered
// globally, as `sluice run` does), connected by the in-memory transport and by real gRPC on
// 127.0.0.1. The controller's RequestQuota span must be the child of the job's Input.Throttle span.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { systemClock } from "@sluice/core";
import { Controller, REQUEST_QUOTA_SPAN, startController } from "@sluice/controller";
import { createGrpcQuotaClient, createInMemoryQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { defineComputation, MemoryIoFactory, Worker } from "@sluice/runtime";
import { validatePipelineSpec, type PipelineSpec } from "@sluice/spec";

const workerSpans = new InMemorySpanExporter();
const workerProvider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "sluice-worker" }),
  spanProcessors: [new SimpleSpanProcessor(workerSpans)],
});
workerProvider.register({ propagator: new W3CTraceContextPropagator() });
const controllerSpans = new InMemorySpanExporter();
const controllerProvider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "sluice-controller" }),
  spanProcessors: [new SimpleSpanProcessor(controllerSpans)],
});
after(() => Promise.all([workerProvider.shutdown(), controllerProvider.shutdown()]));

const ROWS = 300;

function pipeline(): PipelineSpec {
  const parsed = validatePipelineSpec({
    pipeline: "propagation",
    streams: { input: { topic: "input" } },
    computations: { Relay: { module: "./unused.ts", inputs: ["input"], max_rows_per_batch: 50 } },
    dynamic_spec: {
      throttlers: { rows: { limit: 1000, period: "100ms", request_period: "20ms", classes: { gold: { weight: 1 } } } },
      computations: { Relay: { input_rows_throttler_id: "rows", input_rows_throttler_class_id: "gold" } },
    },
  });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.value;
}

async function runPipeline(spec: PipelineSpec, client: QuotaServiceClient): Promise<void> {
  const io = new MemoryIoFactory(spec);
  for (let i = 0; i < ROWS; i++) io.log.append("input", { key: null, value: new TextEncoder().encode(String(i)), timestampMs: Date.now() });
  const worker = new Worker({
    pipeline: spec,
    specDir: "/nowhere",
    io,
    quotaClient: () => client,
    workerId: "w",
    loaded: { Relay: defineComputation({ process() {} }) },
    log: { info: () => {}, warn: () => {}, error: () => {} },
  });
  const startedAt = Date.now();
  await worker.start();
  while ((worker.stats()[0]?.rows ?? 0) < ROWS) {
    assert.ok(Date.now() - startedAt < 15_000, `${ROWS} rows at 1000/s take well under a second`);
    await new Promise((r) => setTimeout(r, 10));
  }
  await worker.close();
}

/** Every RequestQuota is the child of an Input.Throttle of the same trace, in the other provider. */
function assertParentage(): void {
  const throttles = new Map(
    workerSpans
      .getFinishedSpans()
      .filter((s) => s.name === "Input.Throttle")
      .map((s) => [s.spanContext().spanId, s]),
  );
  const rpcs = controllerSpans.getFinishedSpans().filter((s) => s.name === REQUEST_QUOTA_SPAN);
  assert.equal(throttles.size, ROWS / 50);
  assert.ok(rpcs.length > 0, "the controller recorded RequestQuota spans");
  const withChild = new Set<string>();
  for (const rpc of rpcs) {
    const parentId = rpc.parentSpanContext?.spanId;
    const parent = parentId ? throttles.get(parentId) : undefined;
    assert.ok(parent, `RequestQuota ${rpc.spanContext().spanId} has an Input.Throttle parent (parent: ${parentId ?? "none"})`);
    assert.equal(rpc.spanContext().traceId, parent.spanContext().traceId);
    assert.equal(rpc.parentSpanContext?.isRemote, true, "the parent came over the wire");
    assert.equal(rpc.resource.attributes["service.name"], "sluice-controller");
    assert.equal(parent.resource.attributes["service.name"], "sluice-worker");
    assert.equal(rpc.attributes["sluice.throttler_id"], "rows");
    assert.equal(rpc.attributes["sluice.quota.class_id"], "gold");
    assert.match(String(rpc.attributes["sluice.quota.client_id"]), /^w\/Relay\/0$/);
    withChild.add(parent.spanContext().spanId);
  }
  // A batch (50) exceeds the prefetch window (ceil(1000 × 20 ms) = 20): every Input.Throttle misses
  // the pool and sends a refill of its own.
  assert.equal(withChild.size, throttles.size, "each Input.Throttle has the controller's RequestQuota as a child");
}

function reset(): void {
  workerSpans.reset();
  controllerSpans.reset();
}

describe("RequestQuota spans are children of Input.Throttle across the RPC", () => {
  it("through the in-memory transport (sluice run's embedded controller)", async () => {
    reset();
    const spec = pipeline();
    const controller = new Controller({
      dynamicSpec: spec.dynamic_spec,
      computations: ["Relay"],
      clock: systemClock,
      tracer: controllerProvider.getTracer("@sluice/controller"),
    });
    const client = createInMemoryQuotaClient(controller);
    try {
      await runPipeline(spec, client);
    } finally {
      client.close();
      controller.close();
    }
    assertParentage();
  });

  it("through real gRPC on 127.0.0.1", async () => {
    reset();
    const spec = pipeline();
    const running = await startController({ spec, port: 0, tracer: controllerProvider.getTracer("@sluice/controller") });
    const client = createGrpcQuotaClient(running.address);
    try {
      await runPipeline(spec, client);
    } finally {
      client.close();
      await running.close();
    }
    assertParentage();
  });

  it("a refused request is recorded with its error code", async () => {
    reset();
    const spec = pipeline();
    const controller = new Controller({
      dynamicSpec: spec.dynamic_spec,
      computations: ["Relay"],
      clock: systemClock,
      tracer: controllerProvider.getTracer("@sluice/controller"),
    });
    const client = createInMemoryQuotaClient(controller);
    try {
      await assert.rejects(
        client.requestQuota({ throttlerId: "nope", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: "r1" }),
        /UNKNOWN_THROTTLER|not declared/,
      );
    } finally {
      client.close();
      controller.close();
    }
    const [span] = controllerSpans.getFinishedSpans() as ReadableSpan[];
    assert.ok(span);
    assert.equal(span.attributes["sluice.quota.outcome"], "UNKNOWN_THROTTLER");
    assert.equal(span.attributes["sluice.error.code"], "UNKNOWN_THROTTLER");
    assert.equal(span.status.code, 2);
    assert.equal(span.parentSpanContext, undefined, "no trace context sent: a root span");
  });
});
