// own process: it registers OpenTelemetry's global tracer provider
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { SpanStatusCode } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { validatePipelineSpec } from "@sluice/spec";
import { defineComputation, Worker, type BatchHandler, type IoFactory, type Sink, type Source } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

// The Commit span shows the durable commit: it ends when the source says the offset is durable (the
// Kafka source merges commits and sends them later), or with the commit's error, while the job goes
// on without waiting for it.

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
after(() => provider.shutdown());

interface HeldCommit {
  readonly nextOffset: string;
  settle(error?: Error): void;
}

/** Delivers the batches it is given on partition 0; each commit waits until the test settles it. */
class HeldCommitSource implements Source {
  readonly commits: HeldCommit[] = [];
  private handler: BatchHandler | null = null;

  async start(handler: BatchHandler): Promise<void> {
    this.handler = handler;
  }

  deliver(offsets: readonly number[]): Promise<void> {
    const records = offsets.map((offset) => ({ key: null, value: new TextEncoder().encode("{}"), headers: {}, offset: String(offset), timestampMs: 1_000 }));
    return (this.handler as BatchHandler)(
      { stream: "numbers", partition: 0, records },
      {
        signal: new AbortController().signal,
        commit: (nextOffset) =>
          new Promise<void>((resolve, reject) => this.commits.push({ nextOffset, settle: (error) => (error ? reject(error) : resolve()) })),
        rewind: () => {},
      },
    );
  }

  async close(): Promise<void> {}
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the Commit span", () => {
  it("ends when the commit is durable, or with its error, and the job does not wait for it", async () => {
    const parsed = validatePipelineSpec({
      pipeline: "commits",
      streams: { numbers: { topic: "numbers" } },
      computations: { Counter: { module: "./unused.ts", inputs: ["numbers"] } },
    });
    assert.ok(parsed.ok);
    const source = new HeldCommitSource();
    const discard: Sink = { send: async () => {}, close: async () => {} };
    const io: IoFactory = { createSource: () => source, createSink: () => discard, close: async () => {} };
    const quota = new FakeQuotaClient();
    quota.dynamicSpecJson = JSON.stringify(parsed.value.dynamic_spec);
    const warnings: string[] = [];
    const worker = new Worker({
      pipeline: parsed.value,
      specDir: "/nowhere",
      io,
      quotaClient: () => quota,
      loaded: { Counter: defineComputation({ process() {} }) },
      log: { info: () => {}, warn: (line) => warnings.push(line), error: () => {} },
    });
    await worker.start();

    await source.deliver([0, 1, 2]); // returns with its commit still pending: the job did not wait
    const commitSpans = () => exporter.getFinishedSpans().filter((s) => s.name === "Commit");
    const iteration = exporter.getFinishedSpans().find((s) => s.name === "Counter iteration");
    assert.ok(iteration, "the iteration ended");
    assert.equal(source.commits.length, 1);
    assert.deepEqual(commitSpans(), [], "no Commit span ends before the commit is durable");

    await sleep(60); // the merge interval and the broker, as the span should show them
    source.commits[0]?.settle();
    await sleep(0);
    const [durable] = commitSpans();
    assert.ok(durable, "ended once durable");
    assert.equal(durable.parentSpanContext?.spanId, iteration.spanContext().spanId, "a child of its iteration");
    assert.equal(durable.attributes["sluice.commit.offset"], "3");
    assert.equal(durable.attributes["sluice.commit.durable"], true);
    assert.notEqual(durable.status.code, SpanStatusCode.ERROR);
    const lastedMs = durable.duration[0] * 1e3 + durable.duration[1] / 1e6;
    assert.ok(lastedMs >= 50, `the span lasted ${lastedMs.toFixed(1)} ms, the time the commit took to be durable`);

    await source.deliver([3, 4]);
    source.commits[1]?.settle(new Error('commit of offset 5 for stream "numbers" partition 0 failed after 3 attempt(s): broker unreachable'));
    await sleep(0);
    const failed = commitSpans()[1];
    assert.ok(failed, "ended with the failure");
    assert.equal(failed.status.code, SpanStatusCode.ERROR);
    assert.match(failed.status.message ?? "", /commit of offset 5 .* failed after 3 attempt\(s\): broker unreachable/);
    assert.equal(failed.attributes["sluice.commit.durable"], false);
    assert.equal(failed.events.filter((e) => e.name === "exception").length, 1, "the exception is recorded");
    assert.match(warnings.join("\n"), /rows before offset 5 are processed again if the job restarts before a later commit/);
    await worker.close();
  });
});
