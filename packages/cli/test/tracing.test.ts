import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { propagation, trace } from "@opentelemetry/api";
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-node";
import { validatePipelineSpec } from "@sluice/spec";
import { runServices } from "../src/traced-services.ts";
import { otelDiagLogger } from "../src/otel-diag-logger.ts";
import { otlpTracesUrl, parseOtlpUrl, startTracing } from "../src/tracing.ts";

const spec = (() => {
  const parsed = validatePipelineSpec({
    pipeline: "p",
    streams: { s: { topic: "s" } },
    computations: { A: { module: "./a.ts", inputs: ["s"] }, B: { module: "./b.ts", inputs: ["s"] } },
    dynamic_spec: { throttlers: { rows: { limit: 10 } } },
  });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.value;
})();

describe("otlpTracesUrl", () => {
  it("follows the OpenTelemetry endpoint rules", () => {
    assert.equal(otlpTracesUrl(undefined, {}), null, "nothing set: no tracing");
    assert.equal(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "" }), null);
    assert.equal(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://j:4318" }), "http://j:4318/v1/traces");
    assert.equal(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://j:4318/" }), "http://j:4318/v1/traces");
    assert.equal(
      otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://j:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/custom" }),
      "http://t:1/custom",
      "the traces-specific variable is used as it is",
    );
    assert.equal(otlpTracesUrl(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://j:4318", OTEL_SDK_DISABLED: "true" }), null);
    assert.equal(otlpTracesUrl("http://flag:4318", { OTEL_EXPORTER_OTLP_ENDPOINT: "http://env:4318" }), "http://flag:4318/v1/traces", "--otlp wins");
    assert.equal(otlpTracesUrl("http://flag:4318/v1/traces", {}), "http://flag:4318/v1/traces");
  });

  it("--otlp takes http(s) URLs only", () => {
    assert.equal(parseOtlpUrl("https://collector.example:4318"), "https://collector.example:4318");
    assert.throws(() => parseOtlpUrl("127.0.0.1:4318"), /an OTLP\/HTTP endpoint is an http\(s\) URL/);
    assert.throws(() => parseOtlpUrl("grpc://x:4317"), /got "grpc:\/\/x:4317"/);
  });
});

describe("startTracing", () => {
  it("loads no SDK without an endpoint: the libraries' tracers stay no-ops", async () => {
    const tracing = await startTracing({ ...runServices(spec, "w1"), env: {} });
    assert.equal(tracing.enabled, false);
    assert.equal(tracing.embeddedTracer, undefined);
    const span = trace.getTracer("x").startSpan("nothing");
    assert.equal(span.isRecording(), false);
    span.end();
    await tracing.shutdown();
  });

  it("runs untraced, with a warning, when the environment names no http(s) URL", async () => {
    const lines: string[] = [];
    const tracing = await startTracing({
      ...runServices(spec, "w1"),
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "127.0.0.1:4318" },
      stderr: (line) => lines.push(line),
    });
    assert.equal(tracing.enabled, false);
    assert.match(lines.join(""), /no tracing: the OTLP traces endpoint "127\.0\.0\.1:4318\/v1\/traces" is not an http\(s\) URL/);
  });

  it("gives the worker and the embedded controller their own services in one process, and flushes on shutdown", async () => {
    const exporters: InMemorySpanExporter[] = [];
    const finished: { name: string; service: unknown; resource: Record<string, unknown>; parent: string | undefined; trace: string }[] = [];
    const tracing = await startTracing({
      ...runServices(spec, "w1"),
      env: {},
      exporter: () => {
        // Shutdown also shuts the exporter down, which empties it: keep what it received.
        const exporter = new InMemorySpanExporter();
        const original = exporter.export.bind(exporter);
        exporter.export = (spans, done) => {
          for (const s of spans) {
            finished.push({
              name: s.name,
              service: s.resource.attributes["service.name"],
              resource: { ...s.resource.attributes },
              parent: s.parentSpanContext?.spanId,
              trace: s.spanContext().traceId,
            });
          }
          original(spans, done);
        };
        exporters.push(exporter);
        return exporter;
      },
    });
    assert.equal(tracing.enabled, true);
    assert.equal(exporters.length, 2, "one provider per service");
    assert.deepEqual(propagation.fields(), ["traceparent", "tracestate"], "the W3C trace-context propagator is registered");
    const embedded = tracing.embeddedTracer;
    assert.ok(embedded);

    // A worker span (global tracer, as the runtime uses it) with the controller's span as its child.
    trace.getTracer("@sluice/runtime").startActiveSpan("Input.Throttle", (span) => {
      embedded.startSpan("RequestQuota").end();
      span.end();
    });
    assert.equal(finished.length, 0, "batched: nothing exported yet");
    await tracing.shutdown();

    const throttle = finished.find((s) => s.name === "Input.Throttle");
    const rpc = finished.find((s) => s.name === "RequestQuota");
    assert.ok(throttle && rpc, JSON.stringify(finished));
    assert.equal(throttle.service, "sluice-worker");
    assert.equal(rpc.service, "sluice-controller");
    assert.equal(rpc.trace, throttle.trace);
    assert.deepEqual(throttle.resource["sluice.computations"], ["A", "B"]);
    assert.equal(throttle.resource["sluice.pipeline"], "p");
    assert.equal(throttle.resource["sluice.worker_id"], "w1");
    assert.equal(throttle.resource["service.instance.id"], "w1");
    assert.equal(throttle.resource["process.pid"], process.pid);
    assert.equal(rpc.resource["service.instance.id"], "w1/controller");
    assert.equal(rpc.resource["sluice.controller.embedded"], true);
    assert.deepEqual(rpc.resource["sluice.throttlers"], ["rows"]);
    assert.equal(typeof throttle.resource["telemetry.sdk.version"], "string", "the SDK's own resource is kept");

    // Shut down means unregistered: later spans are no-ops, and a new setup could register again.
    assert.equal(trace.getTracer("x").startSpan("after").isRecording(), false);
  });

  it("keeps OTEL_RESOURCE_ATTRIBUTES, below its own attributes", async () => {
    const seen: Record<string, unknown>[] = [];
    const saved = process.env["OTEL_RESOURCE_ATTRIBUTES"];
    process.env["OTEL_RESOURCE_ATTRIBUTES"] = "deployment.environment.name=ci,service.name=overridden"; // read by the SDK's env detector
    after(() => {
      if (saved === undefined) delete process.env["OTEL_RESOURCE_ATTRIBUTES"];
      else process.env["OTEL_RESOURCE_ATTRIBUTES"] = saved;
    });
    const tracing = await startTracing({
      service: runServices(spec, "w2").service,
      env: {},
      exporter: () => {
        const exporter = new InMemorySpanExporter();
        exporter.export = (spans, done) => {
          seen.push(...spans.map((s) => ({ ...s.resource.attributes })));
          done({ code: 0 });
        };
        return exporter;
      },
    });
    trace.getTracer("t").startSpan("one").end();
    await tracing.shutdown();
    assert.equal(seen[0]?.["deployment.environment.name"], "ci");
    assert.equal(seen[0]?.["service.name"], "sluice-worker");
  });
});

describe("otelDiagLogger", () => {
  it("prints the message of a JSON-serialized export error once, then at most once a minute with a count", () => {
    const lines: string[] = [];
    let now = 0;
    const logger = otelDiagLogger(
      (line) => lines.push(line),
      "traces to http://c:4318/v1/traces",
      () => now,
    );
    const failure = JSON.stringify({ message: "connect ECONNREFUSED 127.0.0.1:4318", stack: "Error: …", code: "ECONNREFUSED" });
    logger.error(failure);
    now = 5_000;
    logger.error(failure);
    logger.error(failure);
    now = 61_000;
    logger.error(failure);
    logger.warn("something else", new Error("with a cause"));
    assert.deepEqual(lines, [
      "sluice: OpenTelemetry error (traces to http://c:4318/v1/traces): connect ECONNREFUSED 127.0.0.1:4318\n",
      "sluice: OpenTelemetry error (traces to http://c:4318/v1/traces): connect ECONNREFUSED 127.0.0.1:4318 (2 more like it since the last one)\n",
      "sluice: OpenTelemetry warning (traces to http://c:4318/v1/traces): something else with a cause\n",
    ]);
  });
});

describe("startTracing with OTEL_TRACES_EXPORTER", () => {
  it("console: spans printed as they end, and the startup line says where they go", async () => {
    const printed: unknown[] = [];
    const original = console.dir;
    console.dir = (item: unknown) => void printed.push(item); // ConsoleSpanExporter prints with console.dir
    try {
      const tracing = await startTracing({ service: runServices(spec, "w3").service, env: { OTEL_TRACES_EXPORTER: "console" } });
      assert.equal(tracing.enabled, true);
      assert.equal(tracing.url, null);
      assert.match(tracing.description, /^tracing to stdout \(console\) as sluice-worker$/);
      trace.getTracer("t").startSpan("printed").end();
      await tracing.shutdown();
    } finally {
      console.dir = original;
    }
    assert.ok(
      printed.some((p) => (p as { name?: string }).name === "printed"),
      JSON.stringify(printed),
    );
  });

  it("zipkin and none: the line names the Zipkin endpoint; none starts nothing", async () => {
    const zipkin = await startTracing({
      service: runServices(spec, "w4").service,
      env: { OTEL_TRACES_EXPORTER: "zipkin", OTEL_EXPORTER_ZIPKIN_ENDPOINT: "http://127.0.0.1:1/api/v2/spans" },
    });
    assert.match(zipkin.description, /^tracing to http:\/\/127\.0\.0\.1:1\/api\/v2\/spans \(Zipkin\) as sluice-worker$/);
    await zipkin.shutdown();
    const none = await startTracing({
      service: runServices(spec, "w5").service,
      env: { OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1" },
    });
    assert.equal(none.enabled, false);
  });
});
