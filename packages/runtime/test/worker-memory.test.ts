import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { isSluiceError } from "@sluice/core";
import { validatePipelineSpec, type PipelineSpec } from "@sluice/spec";
import { defineComputation, MemoryIoFactory, Worker, type Computation, type RuntimeContext } from "../src/index.ts";
import { FakeQuotaClient } from "../../client/test/fake-quota-client.ts";

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
after(() => provider.shutdown());

function pipeline(overrides: Record<string, unknown> = {}): PipelineSpec {
  const result = validatePipelineSpec({
    pipeline: "memtest",
    streams: {
      numbers: { topic: "numbers", partitions: 3 },
      doubled: { topic: "doubled", partitions: 2 },
    },
    computations: {
      Doubler: { module: "./unused.ts", inputs: ["numbers"], outputs: ["doubled"], max_rows_per_batch: 25 },
    },
    dynamic_spec: {
      throttlers: { rows: { limit: 1_000_000 }, bytes: { limit: 1e12 } },
      computations: { Doubler: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } },
    },
    ...overrides,
  });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

async function runUntil(worker: Worker, done: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out; stats ${JSON.stringify(worker.stats())}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function setup(computation: Computation, spec = pipeline()) {
  const io = new MemoryIoFactory(spec);
  const quota = new FakeQuotaClient();
  quota.dynamicSpecJson = JSON.stringify(spec.dynamic_spec);
  const errors: string[] = [];
  const worker = new Worker({
    pipeline: spec,
    specDir: "/nowhere",
    io,
    quotaClient: () => quota,
    workerId: "w1",
    loaded: { Doubler: computation },
    restartBackoffMs: { min: 5, max: 20 },
    log: { info: () => {}, warn: () => {}, error: (m) => errors.push(m) },
  });
  return { io, quota, worker, errors, spec };
}

function produce(io: MemoryIoFactory, count: number): void {
  for (let i = 0; i < count; i++) {
    io.log.append("numbers", { key: new TextEncoder().encode(`k${i}`), value: new TextEncoder().encode(JSON.stringify({ n: i })), timestampMs: 1_000 + i });
  }
}

const doubler = defineComputation<{ n: number }>({
  process(batch, ctx) {
    for (const m of batch.messages) ctx.emit("doubled", { key: m.key, value: { n: m.value.n * 2 } });
  },
});

describe("Worker on the memory log", () => {
  it("processes every message once, outputs before commits, throttling rows and bytes per iteration", async () => {
    exporter.reset();
    const { io, quota, worker } = setup(doubler);
    produce(io, 600);
    await worker.start();
    await runUntil(worker, () => (worker.stats()[0]?.rows ?? 0) >= 600);
    await worker.close();
    const out = io.log.records("doubled").flat().map((r) => (JSON.parse(new TextDecoder().decode(r.value ?? new Uint8Array())) as { n: number }).n);
    assert.equal(out.length, 600);
    assert.deepEqual(new Set(out), new Set(Array.from({ length: 600 }, (_, i) => i * 2)));
    for (let p = 0; p < 3; p++) {
      assert.equal(io.log.committedOffset("memtest.Doubler", "numbers", p), io.log.endOffset("numbers", p), `partition ${p} committed to its end`);
    }
    // every iteration asked for rows and bytes together: the prefetching clients saw both throttlers
    assert.ok(quota.calls.some((c) => c.throttlerId === "rows") && quota.calls.some((c) => c.throttlerId === "bytes"));
    const consumed = worker.throttlerMetrics();
    assert.equal(consumed.find((m) => m.throttlerId === "rows")?.consumed, 600, "600 rows consumed");
    const bytes = io.log.records("numbers").flat().reduce((sum, r) => sum + (r.key?.byteLength ?? 0) + (r.value?.byteLength ?? 0), 0);
    assert.equal(consumed.find((m) => m.throttlerId === "bytes")?.consumed, bytes, "Σ byteSize consumed");
  });

  it("traces each iteration with Input.Throttle, Process, Output and Commit children", async () => {
    exporter.reset();
    const { io, worker } = setup(doubler);
    produce(io, 30);
    await worker.start();
    await runUntil(worker, () => (worker.stats()[0]?.rows ?? 0) >= 30);
    await worker.close();
    const spans = exporter.getFinishedSpans();
    const iterations = spans.filter((s) => s.name === "Doubler iteration");
    assert.ok(iterations.length >= 3, `${iterations.length} iterations`);
    const childrenOf = (parent: ReadableSpan) =>
      spans.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId).map((s) => s.name);
    for (const iteration of iterations) assert.deepEqual(childrenOf(iteration), ["Input.Throttle", "Process", "Output", "Commit"]);
    const throttle = spans.find((s) => s.name === "Input.Throttle");
    assert.equal(throttle?.attributes["sluice.throttle.rows.throttler_id"], "rows");
    assert.equal(throttle?.attributes["sluice.throttle.bytes.throttler_id"], "bytes");
    assert.equal(throttle?.attributes["sluice.throttle.rows.class_id"], "default");
    assert.equal(typeof throttle?.attributes["sluice.throttle.wait_ms"], "number");
    const rowsAmounts = spans.filter((s) => s.name === "Input.Throttle").map((s) => Number(s.attributes["sluice.throttle.rows.amount"]));
    assert.equal(rowsAmounts.reduce((a, b) => a + b, 0), 30);
  });

  it("restarts a failing job from the last committed offset: nothing lost", async () => {
    let failed = false;
    const flaky = defineComputation<{ n: number }>({
      process(batch, ctx) {
        if (!failed && batch.messages.some((m) => m.value.n === 40)) {
          failed = true;
          ctx.emit("doubled", { value: { n: -1 } }); // dropped: outputs of a failed iteration are never sent
          throw new Error("enrichment backend said no");
        }
        for (const m of batch.messages) ctx.emit("doubled", { key: m.key, value: { n: m.value.n * 2 } });
      },
    });
    const { io, worker, errors } = setup(flaky);
    produce(io, 300);
    await worker.start();
    await runUntil(worker, () => (worker.stats()[0]?.rows ?? 0) >= 300);
    await worker.close();
    const out = io.log.records("doubled").flat().map((r) => (JSON.parse(new TextDecoder().decode(r.value ?? new Uint8Array())) as { n: number }).n);
    assert.equal(out.length, 300);
    assert.ok(!out.includes(-1));
    assert.equal(worker.stats()[0]?.failures, 1);
    assert.match(errors.join("\n"), /failed \(1 in a row\): enrichment backend said no; restarting from the last committed offset/);
  });

  it("lets user code take throttlers by id: undeclared ids throw THROTTLER_NOT_DECLARED, tryGet returns null", async () => {
    const seen: string[] = [];
    const manual = defineComputation({
      async init(ctx: RuntimeContext) {
        seen.push(ctx.tryGetThrottler("nope") === null ? "null" : "handle");
        try {
          ctx.getThrottlerOrThrow("nope");
        } catch (error) {
          if (isSluiceError(error, "THROTTLER_NOT_DECLARED")) seen.push(error.message);
        }
      },
      async process(batch, ctx) {
        await ctx.getThrottlerOrThrow("rows").throttle(batch.messages.length);
      },
    });
    const { io, worker } = setup(manual);
    produce(io, 10);
    await worker.start();
    await runUntil(worker, () => (worker.stats()[0]?.rows ?? 0) >= 10);
    await worker.close();
    assert.equal(seen[0], "null");
    assert.match(seen[1] ?? "", /THROTTLER_NOT_DECLARED: throttler "nope" is not declared in dynamic_spec.throttlers \(computation "Doubler"; declared: "rows", "bytes"\)/);
  });

  it("fails the iteration when user code emits to a stream that is not an output", async () => {
    const wrong = defineComputation({
      process(_batch, ctx) {
        ctx.emit("numbers", { value: 1 });
      },
    });
    const { io, worker, errors } = setup(wrong);
    produce(io, 1);
    await worker.start();
    await runUntil(worker, () => errors.length > 0);
    await worker.close();
    assert.match(errors[0] ?? "", /emitted to stream "numbers", which is not among its outputs \("doubled"\)/);
  });

  it("sends the job's lag timestamp (oldest unprocessed event time + stream_delay) with each refill", async () => {
    const spec = pipeline({
      streams: { numbers: { topic: "numbers", partitions: 1, stream_delay: "1s" }, doubled: { topic: "doubled" } },
      dynamic_spec: { throttlers: { rows: { limit: 1e6 } }, computations: { Doubler: { input_rows_throttler_id: "rows" } } },
    });
    const { io, quota, worker } = setup(doubler, spec);
    produce(io, 5);
    await worker.start();
    await runUntil(worker, () => (worker.stats()[0]?.rows ?? 0) >= 5);
    await worker.close();
    assert.equal(quota.calls[0]?.timestampMs, 1_000 + 1_000, "event time of the first message + 1 s delay");
    assert.equal(quota.calls[0]?.clientId, "w1/Doubler/0");
  });
});
