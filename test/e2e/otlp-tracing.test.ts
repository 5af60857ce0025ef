// services: processes
// Tracing of real `sluice` processes, read back from an OTLP/HTTP receiver inside the test (no trace
// backend needed; test/e2e/jaeger-tracing.test.ts does the same against a real Jaeger). A throttled
// pipeline of one computation on one partition runs with the embedded controller, and with a
// `sluice controller` in another process over gRPC; the spans must form the docs/design.md §3 trace with
// the controller's RequestQuota under Input.Throttle, carry the right resources, add up to the wait
// the limit imposes, and be flushed when the processes exit (normally and on SIGTERM). Every process
// is started here and ended by its own pid.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { OtlpCollector } from "../support/otlp-collector.ts";
import { type Child, sluice, writeSpec, exitCodeWithin } from "../support/processes.ts";
import { checkThrottleTraces } from "../support/throttle-traces.ts";
import { otelEnv, THROTTLED_EXPECTATION as EXPECTATION, throttledSpec } from "../support/traced-pipeline.ts";

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

describe("sluice processes export their spans by OTLP/HTTP", () => {
  let collector: OtlpCollector;
  before(async () => {
    collector = await OtlpCollector.start();
  });
  after(() => collector.close());

  it("sluice run with the embedded controller: two services in one process, RequestQuota under Input.Throttle", async (t) => {
    const pipeline = `otlp-embedded-${process.pid}`;
    const run = sluice(
      ["run", writeSpec(throttledSpec(pipeline)), "--drain", "--quiet", "--worker-id", "w-embedded", "--otlp", collector.endpoint],
      otelEnv(null),
    );
    children.push(run);
    assert.equal(await exitCodeWithin(run, 120_000), 0, run.stderr);
    assert.match(run.stdout, /tracing to http:\/\/127\.0\.0\.1:\d+\/v1\/traces as sluice-worker and sluice-controller/);

    // Exported on the way out: the batch processor's 5 s delay has not passed for the last spans.
    const spans = collector.spans.filter((s) => s.resource["sluice.pipeline"] === pipeline);
    const summary = checkThrottleTraces(spans, { ...EXPECTATION, controllerInAnotherProcess: false });
    t.diagnostic(`summary ${JSON.stringify(summary)}`);
    // A batch (50) exceeds the prefetch window (ceil(200 × 100 ms) = 20): every Input.Throttle
    // misses the pool and sends its own RequestQuota.
    assert.equal(summary.throttlesWithRequestQuota, summary.throttles);

    const worker = spans.find((s) => s.service === "sluice-worker");
    const controller = spans.find((s) => s.service === "sluice-controller");
    assert.ok(worker && controller);
    assert.deepEqual(worker.resource["sluice.computations"], ["Reader"]);
    assert.equal(worker.resource["sluice.worker_id"], "w-embedded");
    assert.equal(worker.resource["service.instance.id"], "w-embedded");
    assert.equal(controller.resource["service.instance.id"], "w-embedded/controller");
    assert.equal(controller.resource["sluice.controller.embedded"], true);
    assert.deepEqual(controller.resource["sluice.throttlers"], ["rows"]);
    assert.equal(controller.resource["process.pid"], worker.resource["process.pid"], "one process, two services");
  });

  it("sluice controller + sluice run in two processes: the trace context crosses a real gRPC connection", async (t) => {
    const pipeline = `otlp-remote-${process.pid}`;
    // The controller takes the endpoint from the environment, the worker from --otlp: both ways work.
    const started = await (async () => {
      const child = sluice(["controller", writeSpec(throttledSpec(pipeline)), "--port", "0"], otelEnv(collector.endpoint));
      children.push(child);
      const match = await child.waitFor(/listening on 127\.0\.0\.1:(\d+)/);
      return { child, address: `127.0.0.1:${match[1]}` };
    })();
    assert.match(started.child.stdout, /tracing to http:\/\/127\.0\.0\.1:\d+\/v1\/traces as sluice-controller/);
    const run = sluice(
      ["run", writeSpec(throttledSpec(pipeline, started.address)), "--drain", "--quiet", "--worker-id", "w-remote", "--otlp", collector.endpoint],
      otelEnv(null),
    );
    children.push(run);
    assert.equal(await exitCodeWithin(run, 120_000), 0, run.stderr);
    assert.match(run.stdout, /as sluice-worker\n/, "no embedded controller, no second service");

    // The controller's spans are flushed by its SIGTERM shutdown.
    started.child.kill("SIGTERM");
    assert.equal(await exitCodeWithin(started.child, 120_000), 0, started.child.stderr);
    const spans = collector.spans.filter((s) => s.resource["sluice.pipeline"] === pipeline);
    const summary = checkThrottleTraces(spans, { ...EXPECTATION, controllerInAnotherProcess: true });
    t.diagnostic(`summary ${JSON.stringify(summary)}`);
    // A batch (50) exceeds the prefetch window (ceil(200 × 100 ms) = 20): every Input.Throttle
    // misses the pool and sends its own RequestQuota.
    assert.equal(summary.throttlesWithRequestQuota, summary.throttles);
    const controller = spans.find((s) => s.service === "sluice-controller");
    assert.equal(controller?.resource["sluice.controller.embedded"], false);
    assert.equal(controller?.resource["process.pid"], started.child.pid, "the RequestQuota spans came from the `sluice controller` process");
    assert.equal(spans.find((s) => s.service === "sluice-worker")?.resource["process.pid"], run.pid);
  });

  it("no endpoint, no tracing: nothing is exported and no SDK line is printed", async () => {
    const pipeline = `otlp-off-${process.pid}`;
    const before = collector.spans.length;
    const spec = throttledSpec(pipeline);
    const run = sluice(["run", writeSpec(spec), "--drain", "--quiet"], otelEnv(null));
    children.push(run);
    assert.equal(await exitCodeWithin(run, 120_000), 0, run.stderr);
    assert.doesNotMatch(run.stdout, /tracing to/);
    assert.equal(collector.spans.length, before);
  });

  it("--otlp refuses what is not an http(s) URL", async () => {
    const run = sluice(["run", writeSpec(throttledSpec("otlp-bad")), "--otlp", "127.0.0.1:4318"], otelEnv(null));
    children.push(run);
    assert.equal(await exitCodeWithin(run, 120_000), 2);
    assert.match(run.stderr, /an OTLP\/HTTP endpoint is an http\(s\) URL such as http:\/\/127\.0\.0\.1:4318, got "127\.0\.0\.1:4318"/);
  });
});
