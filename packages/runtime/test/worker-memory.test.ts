// own process: it registers OpenTelemetry's global tracer provider
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { isSluiceError, QuotaBucketDriver, quotaBucketConfig, SluiceError, systemClock, type Throttler } from "@sluice/core";
import type { CallOptions, RequestQuotaCall } from "@sluice/protocol";
import { validatePipelineSpec, type PipelineSpec } from "@sluice/spec";
import { defineComputation, MemoryIoFactory, Worker, type Computation, type RuntimeContext } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

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

function setup(computation: Computation, spec = pipeline(), quota: FakeQuotaClient = new FakeQuotaClient()) {
  const io = new MemoryIoFactory(spec);
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

/** Grants through one token bucket per throttler (core's QuotaBucketDriver) on the real clock. */
class ThrottlingQuotaClient extends FakeQuotaClient {
  private readonly buckets = new Map<string, QuotaBucketDriver>();

  constructor(spec: PipelineSpec) {
    super();
    for (const [id, throttler] of Object.entries(spec.dynamic_spec.throttlers)) {
      this.buckets.set(id, new QuotaBucketDriver(id, quotaBucketConfig({ limit: throttler.limit, periodMs: throttler.period }), systemClock));
    }
  }

  override async requestQuota(call: RequestQuotaCall, options?: CallOptions) {
    this.calls.push(call);
    const bucket = this.buckets.get(call.throttlerId);
    if (!bucket) throw new Error(`no throttler ${call.throttlerId}`);
    return bucket.acquire({ amount: call.amount, requestId: call.requestId, clientId: call.clientId, deadlineAt: options?.deadlineAt ?? null });
  }

  /**
   * Ends the buckets' timers: a prefetch the closed worker left waiting would otherwise keep this
   * process alive until its deadline, long after the tests.
   */
  override close(): void {
    for (const bucket of this.buckets.values()) bucket.close(new SluiceError("CANCELLED", "the test's quota client closed"));
  }
}

type IoEvent = { kind: "ack"; keys: string[] } | { kind: "commit"; partition: number; nextOffset: string };

/**
 * Records, in order, each output batch once the sink acknowledged it (after a random 0–3 ms, like
 * a broker) and each commit the moment the job asks for it.
 */
function recordOutputsAndCommits(io: MemoryIoFactory): IoEvent[] {
  const events: IoEvent[] = [];
  const createSink = io.createSink.bind(io);
  io.createSink = () => {
    const sink = createSink();
    return {
      send: async (stream, records) => {
        await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 4)));
        await sink.send(stream, records);
        events.push({ kind: "ack", keys: records.map((r) => new TextDecoder().decode(r.key ?? new Uint8Array())) });
      },
      close: () => sink.close(),
    };
  };
  const createSource = io.createSource.bind(io);
  io.createSource = (...args) => {
    const source = createSource(...args);
    return {
      start: (handler, listener) =>
        source.start(
          (batch, context) =>
            handler(batch, {
              signal: context.signal,
              rewind: () => context.rewind(),
              commit: (nextOffset) => {
                events.push({ kind: "commit", partition: batch.partition, nextOffset });
                return context.commit(nextOffset);
              },
            }),
          listener,
        ),
      close: () => source.close(),
    };
  };
  return events;
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
    // A quota client that really throttles (core's token bucket on the real clock): rows at
    // 1,000/s from a bucket of 50, so 600 rows take about 0.55 s and iterations wait for quota.
    const spec = pipeline({
      dynamic_spec: {
        throttlers: { rows: { limit: 1_000, period: "50ms", request_period: "50ms" }, bytes: { limit: 1e12 } },
        computations: { Doubler: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } },
      },
    });
    const { io, quota, worker } = setup(doubler, spec, new ThrottlingQuotaClient(spec));
    const events = recordOutputsAndCommits(io);
    produce(io, 600);
    const started = performance.now();
    await worker.start();
    await runUntil(worker, () => (worker.stats()[0]?.rows ?? 0) >= 600);
    const tookMs = performance.now() - started;
    await worker.close();
    quota.close();
    const out = io.log
      .records("doubled")
      .flat()
      .map((r) => (JSON.parse(new TextDecoder().decode(r.value ?? new Uint8Array())) as { n: number }).n);
    assert.equal(out.length, 600);
    assert.deepEqual(new Set(out), new Set(Array.from({ length: 600 }, (_, i) => i * 2)));
    for (let p = 0; p < 3; p++) {
      assert.equal(io.log.committedOffset("memtest.Doubler", "numbers", p), io.log.endOffset("numbers", p), `partition ${p} committed to its end`);
    }

    // Order: when offset o of partition p is committed, the output of every input of p below o was
    // acknowledged before it (the sink acknowledges after a random delay, so a commit that went
    // first would show here).
    const inputs = io.log.records("numbers").map((records) => records.map((r) => new TextDecoder().decode(r.key ?? new Uint8Array())));
    const acknowledged = new Set<string>();
    let commits = 0;
    for (const event of events) {
      if (event.kind === "ack") {
        for (const key of event.keys) acknowledged.add(key);
        continue;
      }
      commits += 1;
      const before = inputs[event.partition]?.slice(0, Number(event.nextOffset)) ?? [];
      const missing = before.filter((key) => !acknowledged.has(key));
      assert.deepEqual(missing, [], `commit of offset ${event.nextOffset} on partition ${event.partition} came before the outputs of ${missing.join(", ")}`);
    }
    assert.ok(commits >= 600 / 25, `${commits} commits, one per iteration of ≤ 25 rows`);

    // It really throttled: at 1,000/s, after the bucket (50) and at most one refill of overdraft
    // (ceil(1,000 × 50 ms) = 50), 500 rows need 0.5 s; 0.4 s allows for timer granularity.
    assert.ok(tookMs >= 400, `600 rows took ${tookMs.toFixed(0)} ms at 1,000/s`);
    const consumed = worker.throttlerMetrics();
    const rows = consumed.find((m) => m.throttlerId === "rows");
    assert.ok((rows?.waitCount ?? 0) > 0, "some throttle() calls waited for quota");
    // every iteration asked for rows and bytes together: the prefetching clients saw both throttlers
    assert.ok(quota.calls.some((c) => c.throttlerId === "rows") && quota.calls.some((c) => c.throttlerId === "bytes"));
    assert.equal(rows?.consumed, 600, "600 rows consumed");
    const bytes = io.log
      .records("numbers")
      .flat()
      .reduce((sum, r) => sum + (r.key?.byteLength ?? 0) + (r.value?.byteLength ?? 0), 0);
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
    const childrenOf = (parent: ReadableSpan) => spans.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId).map((s) => s.name);
    for (const iteration of iterations) assert.deepEqual(childrenOf(iteration), ["Input.Throttle", "Process", "Output", "Commit"]);
    const throttle = spans.find((s) => s.name === "Input.Throttle");
    assert.equal(throttle?.attributes["sluice.throttle.rows.throttler_id"], "rows");
    assert.equal(throttle?.attributes["sluice.throttle.bytes.throttler_id"], "bytes");
    assert.equal(throttle?.attributes["sluice.throttle.rows.class_id"], "default");
    assert.equal(typeof throttle?.attributes["sluice.throttle.wait_ms"], "number");
    const rowsAmounts = spans.filter((s) => s.name === "Input.Throttle").map((s) => Number(s.attributes["sluice.throttle.rows.amount"]));
    assert.equal(
      rowsAmounts.reduce((a, b) => a + b, 0),
      30,
    );
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
    const out = io.log
      .records("doubled")
      .flat()
      .map((r) => (JSON.parse(new TextDecoder().decode(r.value ?? new Uint8Array())) as { n: number }).n);
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
        const rows = ctx.getThrottlerOrThrow("rows");
        kept.push(rows);
        await rows.throttle(batch.messages.length);
      },
    });
    const kept: Throttler[] = [];
    const { io, worker } = setup(manual);
    produce(io, 10);
    await worker.start();
    await runUntil(worker, () => (worker.stats()[0]?.rows ?? 0) >= 10);
    await worker.close();
    // A handle kept past its job says that the job stopped (not "no longer declared… add it back").
    assert.ok(kept[0], "process() took a handle");
    await assert.rejects(kept[0].throttle(1), (error: unknown) => {
      assert.ok(isSluiceError(error, "CANCELLED"), String(error));
      assert.match(
        error.message,
        /^CANCELLED: throttler "rows" \(computation "Doubler"\): job w1\/Doubler\/\d stopped \(take a new handle from the context of a running job\); this handle no longer serves calls$/,
      );
      return true;
    });
    assert.equal(seen[0], "null");
    assert.match(
      seen[1] ?? "",
      /THROTTLER_NOT_DECLARED: throttler "nope" is not declared in dynamic_spec.throttlers \(computation "Doubler"; declared: "rows", "bytes"\)/,
    );
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
