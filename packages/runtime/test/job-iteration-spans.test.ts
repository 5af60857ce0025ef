// own process: it registers OpenTelemetry's global tracer provider
// The spans of a Job's iteration (docs/design.md §3) whichever way Process returns: a process() that
// returns nothing and an Output with nothing emitted end their spans without the iteration waiting
// for them, an async process() and a real Output are awaited, and a failing process() (thrown or
// rejected) fails its span and its iteration, which rewinds and commits nothing.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { SpanStatusCode } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { validatePipelineSpec } from "@sluice/spec";
import type { BatchContext, ComputationDefinition, Sink, SinkRecord, SourceRecord } from "../src/index.ts";
import { testJob } from "./job-factory.ts";

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
after(() => provider.shutdown());

const spec = (() => {
  const result = validatePipelineSpec({
    pipeline: "spantest",
    streams: { input: { topic: "input", partitions: 1 }, out: { topic: "out", partitions: 1 } },
    computations: { Stage: { module: "./unused.ts", inputs: ["input"], outputs: ["out"], max_rows_per_batch: 2 } },
  });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
})();

const records = (count: number): SourceRecord[] =>
  Array.from({ length: count }, (_, i) => ({ key: null, value: Buffer.from(`{"n":${i}}`), headers: {}, offset: String(i), timestampMs: 1_000 + i }));

async function run(definition: ComputationDefinition, count: number, onSend: (batchLength: number) => void = () => {}) {
  exporter.reset();
  const sent: SinkRecord[] = [];
  const sink: Sink = {
    send: async (_stream, batch) => {
      sent.push(...batch);
      onSend(batch.length);
    },
    close: async () => undefined,
  };
  const commits: string[] = [];
  let rewinds = 0;
  const errors: string[] = [];
  const context: BatchContext = {
    signal: new AbortController().signal,
    commit: async (offset) => void commits.push(offset),
    rewind: () => void (rewinds += 1),
  };
  const job = testJob({ spec, computationName: "Stage", computation: definition, sink, tracer: provider.getTracer("job-iteration-spans-test"), errors });
  await job.handle({ stream: "input", partition: 0, records: records(count) }, context);
  await job.close();
  // The Commit spans end when the commit settles, after the iteration: give them that turn.
  await new Promise((resolve) => setImmediate(resolve));
  const spans = exporter.getFinishedSpans();
  const iterations = spans.filter((s) => s.name === "Stage iteration");
  const childrenOf = (parent: ReadableSpan) => spans.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId);
  return { sent, commits, rewinds, errors, spans, iterations, childrenOf };
}

describe("Job iteration spans", () => {
  it("a process() that returns nothing, with nothing emitted: Process, Output and Commit under each iteration, in order", async () => {
    let calls = 0;
    const { iterations, childrenOf, commits, errors } = await run({ process: () => void (calls += 1) }, 5);
    assert.deepEqual(errors, []);
    assert.equal(calls, 3, "5 records at 2 rows per batch");
    assert.equal(iterations.length, 3);
    for (const iteration of iterations) {
      const children = childrenOf(iteration);
      assert.deepEqual(
        children.map((s) => s.name),
        ["Process", "Output", "Commit"],
      );
      for (const child of children) assert.notEqual(child.status.code, SpanStatusCode.ERROR, child.name);
    }
    assert.deepEqual(commits, ["2", "4", "5"]);
  });

  it("an async process() that emits: the iteration waits for it and for the acknowledged Output before it commits", async () => {
    const order: string[] = [];
    const { sent, commits, iterations, childrenOf } = await run(
      {
        async process(batch, ctx) {
          await new Promise((resolve) => setImmediate(resolve));
          for (const m of batch.messages) ctx.emit("out", { value: m.value });
          order.push(`processed ${batch.messages.length}`);
        },
      },
      3,
      (length) => order.push(`sent ${length}`),
    );
    assert.equal(sent.length, 3);
    assert.deepEqual(order, ["processed 2", "sent 2", "processed 1", "sent 1"], "each Output sent after its process() resolved");
    assert.deepEqual(commits, ["2", "3"]);
    for (const iteration of iterations)
      assert.deepEqual(
        childrenOf(iteration).map((s) => s.name),
        ["Process", "Output", "Commit"],
      );
  });

  for (const [how, definition] of [
    [
      "throws",
      {
        process: () => {
          throw new Error("bad row");
        },
      },
    ],
    [
      "rejects",
      {
        process: async () => {
          throw new Error("bad row");
        },
      },
    ],
  ] as const) {
    it(`a process() that ${how}: its span fails, the iteration rewinds, nothing is committed or sent`, async () => {
      const { spans, commits, rewinds, errors, sent } = await run(definition, 2);
      const processSpan = spans.find((s) => s.name === "Process");
      assert.equal(processSpan?.status.code, SpanStatusCode.ERROR);
      assert.equal(spans.find((s) => s.name === "Stage iteration")?.status.code, SpanStatusCode.ERROR);
      assert.equal(spans.filter((s) => s.name === "Output" || s.name === "Commit").length, 0);
      assert.deepEqual(commits, []);
      assert.equal(sent.length, 0);
      assert.equal(rewinds, 1);
      assert.match(errors[0] ?? "", /bad row/);
    });
  }
});
