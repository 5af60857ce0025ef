import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIssues, validatePipelineSpec, type PipelineSpec } from "@sluice/spec";
import { validSpec, withChanges, type SpecObject } from "./fixtures.ts";

function parseOk(input: unknown): PipelineSpec {
  const result = validatePipelineSpec(input);
  if (!result.ok) assert.fail(`expected a valid spec, got:\n${formatIssues(result.issues)}`);
  return result.value;
}

const minimal: SpecObject = {
  pipeline: "tiny",
  streams: { in: { topic: "in" } },
  computations: { C: { module: "./c.ts", inputs: ["in"] } },
};

describe("validatePipelineSpec on valid specs", () => {
  it("parses the full spec, turning durations into milliseconds and keeping snake_case keys", () => {
    const spec = parseOk(validSpec());
    assert.equal(spec.pipeline, "enricher");
    assert.deepEqual(spec.kafka, { brokers: ["127.0.0.1:19092", "[::1]:9092"], client_id: "sluice-test", session_timeout: 30_000 });
    assert.equal(spec.controller?.address, "127.0.0.1:7070");
    assert.equal(spec.streams["requests"]?.stream_delay, 2_000);
    assert.equal(spec.streams["requests"]?.partitions, 4);
    assert.deepEqual(spec.streams["requests"]?.generator, { module: "./generate.ts", messages: 100, rate_per_second: 50 });
    assert.equal(spec.streams["enriched"]?.format, "string");
    const api = spec.dynamic_spec.throttlers["api"];
    assert.ok(api);
    assert.equal(api.limit, 100);
    assert.equal(api.period, 1_000);
    assert.equal(api.request_period, 500);
    assert.equal(api.rpc_timeout, 5_000);
    assert.equal(api.max_grant_amount, 10);
    assert.deepEqual(api.classes, { vip: { weight: 3 }, batch: { weight: 1 } });
    assert.equal(api.retrying_channel.retry_attempts, 5);
    assert.equal(api.retrying_channel.min_backoff, 100);
    assert.equal(api.retrying_channel.max_backoff, 2_000);
    assert.equal(api.max_queue_size, 500);
    assert.deepEqual(spec.dynamic_spec.computations["Enricher"], {
      input_rows_throttler_id: "api",
      input_rows_throttler_class_id: "vip",
      input_bytes_throttler_id: "bytes",
    });
  });

  it("parses the example of docs/design.md §8", () => {
    const spec = parseOk({
      pipeline: "enricher",
      kafka: { brokers: ["127.0.0.1:19092"] },
      controller: { address: "127.0.0.1:7070" },
      streams: {
        requests: { topic: "requests", format: "json" },
        enriched: { topic: "enriched", format: "json" },
      },
      computations: {
        RequestEnricher: { module: "./enricher.ts", inputs: ["requests"], outputs: ["enriched"], max_rows_per_batch: 100 },
      },
      dynamic_spec: {
        throttlers: { external_api_quota: { limit: 100.0, period: "1s", request_period: "500ms" } },
        computations: { RequestEnricher: { input_rows_throttler_id: "external_api_quota" } },
      },
    });
    assert.equal(spec.dynamic_spec.throttlers["external_api_quota"]?.request_period, 500);
  });

  it("takes the controller's TLS files and server name as written (paths are resolved against the spec file by its reader)", () => {
    const tls = { ca: "./certs/ca.pem", cert: "./certs/worker.pem", key: "./certs/worker.key", server_name: "controller.internal" };
    const spec = parseOk({ ...minimal, controller: { address: "10.0.0.5:7070", tls } });
    assert.deepEqual(spec.controller, { address: "10.0.0.5:7070", tls, max_open_calls_per_stream: 4_096 });
    assert.deepEqual(parseOk({ ...minimal, controller: { address: "10.0.0.5:7070", tls: {} } }).controller?.tls, {}, "{} = TLS with the system's roots");
  });

  it("fills every default", () => {
    const spec = parseOk({
      ...minimal,
      dynamic_spec: { throttlers: { t: {} }, computations: { C: {} } },
    });
    assert.equal(spec.kafka, undefined);
    assert.equal(spec.controller, undefined);
    assert.deepEqual(spec.streams["in"], { topic: "in", format: "json", partitions: 1, stream_delay: 0 });
    assert.deepEqual(spec.computations["C"], { module: "./c.ts", inputs: ["in"], outputs: [], max_rows_per_batch: 100, delivery: "at_least_once" });
    assert.deepEqual(spec.dynamic_spec.throttlers["t"], {
      kind: "rate",
      lease_timeout: 30_000,
      limit: null,
      period: 10_000,
      request_period: 5_000,
      rpc_timeout: 30_000,
      retrying_channel: {
        retry_attempts: 100,
        enable_exponential_retry_backoffs: true,
        retry_timeout: 600_000,
        retry_backoff_time: 3_000,
        min_backoff: 1_000,
        max_backoff: 5_000,
        backoff_multiplier: 1.5,
        backoff_jitter: 0.1,
      },
      max_grant_amount: null,
      classes: {},
      use_class_weights_as_limit: false,
      max_queue_size: 10_000,
      smooth: false,
    });
    assert.deepEqual(spec.dynamic_spec.computations["C"], {});
  });

  it("defaults dynamic_spec to no throttlers and no computation settings", () => {
    assert.deepEqual(parseOk(minimal).dynamic_spec, { throttlers: {}, computations: {} });
  });

  it("defaults each retrying_channel field on its own", () => {
    const spec = parseOk({
      ...minimal,
      dynamic_spec: { throttlers: { t: { retrying_channel: { retry_attempts: 3, enable_exponential_retry_backoffs: false } } } },
    });
    const channel = spec.dynamic_spec.throttlers["t"]?.retrying_channel;
    assert.equal(channel?.retry_attempts, 3);
    assert.equal(channel?.enable_exponential_retry_backoffs, false);
    assert.equal(channel?.retry_timeout, 600_000);
    assert.equal(channel?.retry_backoff_time, 3_000);
  });

  it("does not share default arrays between parses", () => {
    const first = parseOk(minimal);
    first.computations["C"]?.outputs.push("mutated");
    assert.deepEqual(parseOk(minimal).computations["C"]?.outputs, []);
  });

  it('accepts the explicit "default" class on a computation', () => {
    parseOk(withChanges(validSpec(), { "dynamic_spec.computations.Enricher.input_rows_throttler_class_id": "default" }));
  });

  it("accepts use_class_weights_as_limit with classes and no limit", () => {
    const spec = parseOk(
      withChanges(validSpec(), {
        "dynamic_spec.throttlers.weighted": { use_class_weights_as_limit: true, classes: { a: { weight: 10 } }, limit: null },
      }),
    );
    assert.equal(spec.dynamic_spec.throttlers["weighted"]?.use_class_weights_as_limit, true);
  });

  it("accepts smooth with a limit, and with use_class_weights_as_limit (the rate is then the sum of the weights)", () => {
    const spec = parseOk(
      withChanges(validSpec(), {
        "dynamic_spec.throttlers.pdf": { limit: 10, period: "1s", smooth: true },
        "dynamic_spec.throttlers.weighted": { use_class_weights_as_limit: true, classes: { a: { weight: 10 } }, smooth: true },
      }),
    );
    assert.equal(spec.dynamic_spec.throttlers["pdf"]?.smooth, true);
    assert.equal(spec.dynamic_spec.throttlers["weighted"]?.smooth, true);
  });

  it("accepts limit 0, integer-millisecond durations and the largest batch", () => {
    parseOk(
      withChanges(validSpec(), {
        "dynamic_spec.throttlers.api.limit": 0,
        "dynamic_spec.throttlers.api.period": 1,
        "dynamic_spec.throttlers.api.request_period": 1,
        "computations.Enricher.max_rows_per_batch": 100_000,
      }),
    );
  });

  it("accepts a $schema reference for editors", () => {
    parseOk({ $schema: "./node_modules/@sluice/spec/schema.json", ...minimal });
  });
});

describe("computations.<name>.delivery", () => {
  it("accepts exactly_once and refuses anything else with its path", () => {
    const base = { pipeline: "p", streams: { in: { topic: "in" } }, computations: { C: { module: "./c.ts", inputs: ["in"] } } };
    const ok = validatePipelineSpec({ ...base, computations: { C: { ...base.computations.C, delivery: "exactly_once" } } });
    assert.ok(ok.ok && ok.value.computations["C"]?.delivery === "exactly_once");
    const bad = validatePipelineSpec({ ...base, computations: { C: { ...base.computations.C, delivery: "twice" } } });
    assert.ok(!bad.ok);
    const text = JSON.stringify(bad.issues);
    assert.match(text, /computations.*C.*delivery/);
    assert.match(text, /at_least_once/);
  });
});
