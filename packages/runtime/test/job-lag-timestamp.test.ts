import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { ManualClock } from "@sluice/core";
import { DistributedThrottlerFactory } from "@sluice/client";
import { validatePipelineSpec, type PipelineSpec } from "@sluice/spec";
import { defineComputation, type BatchContext, type Sink, type SourceRecord } from "../src/index.ts";
import { UnprocessedEventTimes } from "../src/job/unprocessed-event-times.ts";
import { Job } from "../src/job/job.ts";
import { ComputationStats } from "../src/job/computation-stats.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
after(() => provider.shutdown());
const tracer = provider.getTracer("job-lag-timestamp-test");

function pipeline(): PipelineSpec {
  const result = validatePipelineSpec({
    pipeline: "lagtest",
    streams: {
      clicks: { topic: "clicks", partitions: 1, stream_delay: "1s" },
      orders: { topic: "orders", partitions: 1 },
      out: { topic: "out", partitions: 1 },
    },
    computations: { Joiner: { module: "./unused.ts", inputs: ["clicks", "orders"], outputs: ["out"], max_rows_per_batch: 2 } },
    dynamic_spec: {
      throttlers: { rows: { limit: 1_000_000 } },
      computations: { Joiner: { input_rows_throttler_id: "rows" } },
    },
  });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

const sink: Sink = { send: async () => undefined, close: async () => undefined };

function records(timestamps: readonly number[]): SourceRecord[] {
  return timestamps.map((timestampMs, i) => ({ key: null, value: new TextEncoder().encode("{}"), headers: {}, offset: String(i), timestampMs }));
}

function context(readAheadOldestMs?: () => number | undefined): BatchContext {
  return { signal: new AbortController().signal, commit: async () => undefined, rewind: () => undefined, ...(readAheadOldestMs ? { readAheadOldestMs } : {}) };
}

function job(spec: PipelineSpec, stream: string, shared: UnprocessedEventTimes, stats: ComputationStats, clock: ManualClock, quota: FakeQuotaClient) {
  const throttlers = new DistributedThrottlerFactory({ computation: "Joiner", clientId: `w/Joiner/${stream}`, client: () => quota, clock });
  throttlers.reconfigure(spec.dynamic_spec);
  return new Job({
    pipeline: spec,
    computationName: "Joiner",
    computation: defineComputation({ process: () => undefined }),
    stream,
    partition: 0,
    workerId: "w",
    sink,
    throttlers,
    dynamicSpec: () => spec.dynamic_spec,
    stats,
    eventTimes: shared,
    clock,
    log: { info: () => {}, warn: () => {}, error: () => {} },
    tracer,
  });
}

function priorities(): number[] {
  return exporter
    .getFinishedSpans()
    .filter((s) => s.name === "Input.Throttle")
    .sort((a, b) => (a.startTime[0] - b.startTime[0]) * 1e9 + (a.startTime[1] - b.startTime[1]))
    .map((s) => Number(s.attributes["sluice.throttle.priority_ms"]));
}

describe("Job lag timestamp (docs/design.md §12)", () => {
  it("is the oldest unprocessed event time + stream_delay over the batch's iterations still to come and the fetched-ahead records", async () => {
    exporter.reset();
    const spec = pipeline();
    const clock = new ManualClock(1_000_000);
    const quota = new FakeQuotaClient();
    const stats = new ComputationStats("Joiner");
    const shared = new UnprocessedEventTimes();
    stats.watchLagTimestamp(() => shared.lagTimestamp());
    const clicks = job(spec, "clicks", shared, stats, clock, quota);
    // Three iterations of 2 rows, out of order; a fetched-ahead batch holds 4,000 until the last iteration.
    let ahead: number | undefined = 4_000;
    await clicks.handle(
      { stream: "clicks", partition: 0, records: records([9_000, 8_000, 7_000, 2_000, 6_000, 5_000]) },
      context(() => ahead),
    );
    // stream_delay of clicks is 1 s: iteration 1 sees min(9,8,7,2,6,5 k, 4 k ahead) = 2 k; iteration 2 the same;
    // iteration 3 only [6 k, 5 k] and 4 k ahead.
    assert.deepEqual(priorities(), [3_000, 3_000, 5_000]);
    ahead = undefined;
    assert.equal(shared.lagTimestamp(), 0, "all processed, nothing ahead");
    assert.equal(quota.calls[0]?.timestampMs, 3_000, "the RPC carried the lag timestamp");
    await clicks.close();
  });

  it("takes the minimum over the computation partition's inputs, each with its own stream_delay; an empty input holds nothing back", async () => {
    exporter.reset();
    const spec = pipeline();
    const clock = new ManualClock(1_000_000);
    const quota = new FakeQuotaClient();
    const stats = new ComputationStats("Joiner");
    const shared = new UnprocessedEventTimes();
    stats.watchLagTimestamp(() => shared.lagTimestamp());
    const clicks = job(spec, "clicks", shared, stats, clock, quota);
    const orders = job(spec, "orders", shared, stats, clock, quota);
    // orders has fetched ahead an event at 1,500 (no stream_delay) while clicks processes events at 3,000.
    let ordersAhead: number | undefined = 1_500;
    await orders.handle(
      { stream: "orders", partition: 0, records: [] },
      context(() => ordersAhead),
    );
    await clicks.handle({ stream: "clicks", partition: 0, records: records([3_000]) }, context());
    assert.deepEqual(priorities(), [1_500], "the older input decides");
    assert.equal(stats.view(1_000_000).lagMs, 1_000_000 - 1_500, "the lag metric follows the lag timestamp");
    ordersAhead = undefined;
    await clicks.handle({ stream: "clicks", partition: 0, records: records([3_000]) }, context());
    assert.deepEqual(priorities(), [1_500, 4_000], "orders has nothing outstanding: clicks alone, + 1 s delay");
    await orders.close();
    await clicks.close();
    assert.equal(shared.lagTimestamp(), 0);
    assert.equal(stats.view(1_000_000).lagMs, 1_000_000 - 3_000, "nothing waits: now minus the last processed event");
  });
});
