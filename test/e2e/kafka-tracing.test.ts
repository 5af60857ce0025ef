// services: processes, kafka
// priority: its refusals and waits are measured while other files run: its processes get the CPU first
// Tracing of the distributed deployment on a real Kafka broker: `sluice controller` and
// `sluice worker` as separate processes, their spans read back from an OTLP/HTTP receiver inside the
// test. The worker's iteration spans hold Input.Throttle with the controller's RequestQuota under it
// (the trace context crossed gRPC between the processes), and both processes export what they
// still buffer when they are stopped with SIGTERM. Every process is started here and ended by its
// own pid.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { brokers, consumeAll, createTopic, produce, uniqueName } from "../support/kafka.ts";
import { OtlpCollector } from "../support/otlp-collector.ts";
import { type Child, ROOT, sluice, writeSpec, exitCodeWithin } from "../support/processes.ts";
import { checkThrottleTraces } from "../support/throttle-traces.ts";
import { otelEnv, THROTTLED_EXPECTATION } from "../support/traced-pipeline.ts";

const RELAY = `${ROOT}/test/fixtures/relay-computation.ts`;
const ROWS = THROTTLED_EXPECTATION.rows;

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

describe("sluice controller + sluice worker on Kafka export connected traces", { timeout: 300_000 }, () => {
  let collector: OtlpCollector;
  before(async () => {
    collector = await OtlpCollector.start();
  });
  after(() => collector.close());

  it("the worker's Input.Throttle spans have the controller's RequestQuota spans as children", async (t) => {
    const name = uniqueName("traced");
    const input = `${name}-in`;
    const output = `${name}-out`;
    await createTopic(input, 1);
    await createTopic(output, 1);
    // All rows are in the topic before the worker starts, so the throttler alone sets the pace.
    await produce(input, ROWS);
    const kafkaBrokers = await brokers();
    const specFor = (controller?: string) =>
      writeSpec({
        pipeline: name,
        kafka: { brokers: kafkaBrokers, session_timeout: "6s" },
        ...(controller ? { controller: { address: controller } } : {}),
        streams: { input: { topic: input, partitions: 1 }, out: { topic: output, partitions: 1 } },
        computations: { Relay: { module: RELAY, inputs: ["input"], outputs: ["out"], max_rows_per_batch: THROTTLED_EXPECTATION.maxRowsPerBatch } },
        dynamic_spec: {
          throttlers: { rows: { limit: THROTTLED_EXPECTATION.limit, period: "1s", request_period: "100ms", classes: { bulk: { weight: 2 } } } },
          computations: { Relay: { input_rows_throttler_id: "rows", input_rows_throttler_class_id: "bulk" } },
        },
      });

    const controller = sluice(["controller", specFor(), "--port", "0"], otelEnv(collector.endpoint));
    children.push(controller);
    const port = (await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1];
    const worker = sluice(["worker", specFor(`127.0.0.1:${port}`), "--quiet", "--worker-id", "wk", "--otlp", collector.endpoint], otelEnv(null));
    children.push(worker);
    assert.match((await worker.waitFor(/tracing to [^\n]*/))[0], /as sluice-worker$/);
    const out = await consumeAll(output, ROWS, 90_000);
    assert.equal(new Set(out.map((m) => m.value["id"])).size, ROWS, worker.stderr.slice(-2000));

    // Both export what they still buffer on SIGTERM (the batch processor's delay is 5 s).
    worker.kill("SIGTERM");
    assert.equal(await exitCodeWithin(worker, 120_000), 0, worker.stderr);
    controller.kill("SIGTERM");
    assert.equal(await exitCodeWithin(controller, 120_000), 0, controller.stderr);

    const spans = collector.spans.filter((s) => s.resource["sluice.pipeline"] === name);
    const summary = checkThrottleTraces(spans, { ...THROTTLED_EXPECTATION, computation: "Relay", controllerInAnotherProcess: true });
    t.diagnostic(`summary ${JSON.stringify(summary)}`);
    assert.ok(summary.throttlesWithRequestQuota >= 1);
    const workerSpan = spans.find((s) => s.service === "sluice-worker");
    assert.equal(workerSpan?.resource["sluice.worker_id"], "wk");
    assert.equal(workerSpan?.resource["process.pid"], worker.pid);
    assert.equal(spans.find((s) => s.service === "sluice-controller")?.resource["process.pid"], controller.pid);
  });
});
