import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { traceDestinations } from "../src/trace-exporters.ts";

// OTEL_TRACES_EXPORTER as OpenTelemetry documents it (environment variable specification): a
// comma-separated list of otlp (default), zipkin, console, none; each exporter's endpoint variable.

const kinds = (env: NodeJS.ProcessEnv, flag?: string) => traceDestinations(flag, env).destinations.map((d) => `${d.kind} ${d.url ?? "-"}`);

describe("traceDestinations", () => {
  it("otlp by default, and only with an endpoint (Sluice traces nothing unless asked)", () => {
    assert.deepEqual(kinds({}), []);
    assert.deepEqual(kinds({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://j:4318" }), ["otlp http://j:4318/v1/traces"]);
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: "", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/x" }), ["otlp http://t:1/x"]);
  });

  it("otlp named explicitly without an endpoint: OpenTelemetry's default, localhost:4318", () => {
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: "otlp" }), ["otlp http://localhost:4318/v1/traces"]);
  });

  it("zipkin: OTEL_EXPORTER_ZIPKIN_ENDPOINT, else http://localhost:9411/api/v2/spans", () => {
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: "zipkin" }), ["zipkin http://localhost:9411/api/v2/spans"]);
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: "zipkin", OTEL_EXPORTER_ZIPKIN_ENDPOINT: "http://127.0.0.1:9412/api/v2/spans" }), [
      "zipkin http://127.0.0.1:9412/api/v2/spans",
    ]);
  });

  it("a comma list runs each, once; console has no URL", () => {
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: " Console, zipkin,console ", OTEL_EXPORTER_OTLP_ENDPOINT: "http://j:4318" }), [
      "console -",
      "zipkin http://localhost:9411/api/v2/spans",
    ]);
  });

  it("none turns tracing off, with a warning about the others named beside it", () => {
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://j:4318" }), []);
    const both = traceDestinations(undefined, { OTEL_TRACES_EXPORTER: "none,zipkin" });
    assert.deepEqual(both.destinations, []);
    assert.match(both.warnings.join("\n"), /contains "none": zipkin not started/);
    assert.match(both.off, /OTEL_TRACES_EXPORTER=none/);
  });

  it("an unknown exporter is ignored with a warning naming the ones there are", () => {
    const result = traceDestinations(undefined, { OTEL_TRACES_EXPORTER: "jaeger,zipkin" });
    assert.deepEqual(
      result.destinations.map((d) => d.kind),
      ["zipkin"],
    );
    assert.match(result.warnings.join("\n"), /"jaeger", which Sluice does not export to \(otlp, zipkin, console, none\); ignored/);
  });

  it("--otlp wins: it always exports there by OTLP, beside the other exporters named", () => {
    assert.deepEqual(kinds({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://env:4318" }, "http://flag:4318"), ["otlp http://flag:4318/v1/traces"]);
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: "zipkin" }, "http://flag:4318"), [
      "otlp http://flag:4318/v1/traces",
      "zipkin http://localhost:9411/api/v2/spans",
    ]);
    assert.deepEqual(kinds({ OTEL_TRACES_EXPORTER: "none" }, "http://flag:4318"), ["otlp http://flag:4318/v1/traces"]);
    assert.deepEqual(kinds({ OTEL_SDK_DISABLED: "true" }, "http://flag:4318"), ["otlp http://flag:4318/v1/traces"]);
  });

  it("OTEL_SDK_DISABLED=true: no tracing", () => {
    assert.deepEqual(kinds({ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "zipkin" }), []);
  });
});
