import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIssues, validatePipelineSpec } from "@sluice/spec";
import { REMOVE, validSpec, withChanges, type SpecObject } from "./fixtures.ts";

interface MalformedCase {
  readonly name: string;
  /** Dotted path → new value (REMOVE deletes the key), applied to the valid base spec. */
  readonly changes?: Readonly<Record<string, unknown>>;
  /** For documents that dotted changes cannot express. */
  readonly spec?: () => unknown;
  readonly path: string;
  readonly phrase: string;
}

const T = "dynamic_spec.throttlers.api";
const C = "dynamic_spec.computations.Enricher";

const cases: readonly MalformedCase[] = [
  // Unknown keys, with and without a suggestion.
  { name: "misspelt top-level key", changes: { pipline: "x" }, path: "pipline", phrase: 'did you mean "pipeline"?' },
  {
    name: "misspelt throttler key",
    changes: { [`${T}.request_periud`]: "1s" },
    path: `${T}.request_periud`,
    phrase: 'unknown key "request_periud"; did you mean "request_period"?',
  },
  { name: "camelCase throttler key", changes: { [`${T}.requestPeriod`]: "1s" }, path: `${T}.requestPeriod`, phrase: 'did you mean "request_period"?' },
  {
    name: "misspelt retrying_channel key",
    changes: { [`${T}.retrying_channel.retry_attempt`]: 3 },
    path: `${T}.retrying_channel.retry_attempt`,
    phrase: 'did you mean "retry_attempts"?',
  },
  { name: "misspelt class key", changes: { [`${T}.classes.vip.wieght`]: 2 }, path: `${T}.classes.vip.wieght`, phrase: 'did you mean "weight"?' },
  {
    name: "misspelt computation dynamic key",
    changes: { [`${C}.input_row_throttler_id`]: "api" },
    path: `${C}.input_row_throttler_id`,
    phrase: 'did you mean "input_rows_throttler_id"?',
  },
  {
    name: "unknown stream key without a close match",
    changes: { "streams.requests.colour": "blue" },
    path: "streams.requests.colour",
    phrase: 'unknown key "colour"; allowed keys: topic, format',
  },
  { name: "misspelt kafka key", changes: { "kafka.clientId": "x" }, path: "kafka.clientId", phrase: 'did you mean "client_id"?' },

  // Pipeline, kafka, controller.
  { name: "missing pipeline name", changes: { pipeline: REMOVE }, path: "pipeline", phrase: "pipeline is required" },
  {
    name: "pipeline name with a space",
    changes: { pipeline: "my pipeline" },
    path: "pipeline",
    phrase: `letters, digits, '.', '_' and '-', got "my pipeline"`,
  },
  { name: "empty broker list", changes: { "kafka.brokers": [] }, path: "kafka.brokers", phrase: "non-empty array" },
  { name: "broker without a port", changes: { "kafka.brokers": ["localhost"] }, path: "kafka.brokers[0]", phrase: '"host:port" address' },
  { name: "broker port out of range", changes: { "kafka.brokers": ["127.0.0.1:9092", "kafka:70000"] }, path: "kafka.brokers[1]", phrase: 'got "kafka:70000"' },
  { name: "controller address not host:port", changes: { "controller.address": "http://controller" }, path: "controller.address", phrase: '"host:port"' },
  {
    name: "controller tls cert without its key",
    changes: { "controller.tls": { ca: "./ca.pem", cert: "./client.pem" } },
    path: "controller.tls.cert",
    phrase: "cert needs key",
  },
  { name: "controller tls key without its cert", changes: { "controller.tls": { key: "./client.key" } }, path: "controller.tls.key", phrase: "key needs cert" },
  {
    name: "controller tls ca that is not a path",
    changes: { "controller.tls": { ca: 7 } },
    path: "controller.tls.ca",
    phrase: "a path to the PEM CA certificate(s)",
  },
  {
    name: "controller tls empty server_name",
    changes: { "controller.tls": { server_name: "" } },
    path: "controller.tls.server_name",
    phrase: "must be a host name",
  },
  {
    name: "misspelt controller tls key",
    changes: { "controller.tls": { servername: "c.internal" } },
    path: "controller.tls.servername",
    phrase: 'did you mean "server_name"?',
  },
  { name: "streams is an array", changes: { streams: [] }, path: "streams", phrase: "streams must be an object" },
  { name: "missing computations", changes: { computations: REMOVE }, path: "computations", phrase: "computations is required" },
  { name: "root is not an object", spec: () => [1, 2], path: "(root)", phrase: "the spec must be an object, got an array" },

  // Streams.
  { name: "empty topic", changes: { "streams.requests.topic": "" }, path: "streams.requests.topic", phrase: "Kafka topic name" },
  { name: "topic with a slash", changes: { "streams.requests.topic": "a/b" }, path: "streams.requests.topic", phrase: 'got "a/b"' },
  {
    name: "unknown format",
    changes: { "streams.requests.format": "xml" },
    path: "streams.requests.format",
    phrase: 'format must be one of "json", "string", "bytes", got "xml"',
  },
  {
    name: "zero partitions",
    changes: { "streams.requests.partitions": 0 },
    path: "streams.requests.partitions",
    phrase: "partitions must be an integer ≥ 1, got 0",
  },
  { name: "fractional partitions", changes: { "streams.requests.partitions": 1.5 }, path: "streams.requests.partitions", phrase: "got 1.5" },
  {
    name: "stream_delay with a spelt-out unit",
    changes: { "streams.requests.stream_delay": "5 sec" },
    path: "streams.requests.stream_delay",
    phrase: 'stream_delay must be a duration such as "500ms"',
  },
  { name: "negative stream_delay", changes: { "streams.requests.stream_delay": -5 }, path: "streams.requests.stream_delay", phrase: "got -5" },
  {
    name: "negative generator count",
    changes: { "streams.requests.generator.messages": -1 },
    path: "streams.requests.generator.messages",
    phrase: "an integer ≥ 0, got -1",
  },
  {
    name: "zero generator rate",
    changes: { "streams.requests.generator.rate_per_second": 0 },
    path: "streams.requests.generator.rate_per_second",
    phrase: "greater than 0, got 0",
  },
  {
    name: "generator without a module",
    changes: { "streams.requests.generator.module": REMOVE },
    path: "streams.requests.generator.module",
    phrase: "module is required",
  },
  {
    name: "two streams on one topic",
    changes: { "streams.enriched.topic": "requests" },
    path: "streams.enriched.topic",
    phrase: 'topic "requests" is already used by stream "requests"',
  },
  { name: "empty stream name", changes: { "streams.": { topic: "x" } }, path: 'streams[""]', phrase: "stream name must not be empty" },
  {
    name: "stream that is not an object",
    changes: { "streams.enriched": "enriched" },
    path: "streams.enriched",
    phrase: 'enriched must be an object, got "enriched"',
  },

  // Computations.
  { name: "no inputs", changes: { "computations.Enricher.inputs": [] }, path: "computations.Enricher.inputs", phrase: "non-empty array of stream names" },
  {
    name: "undeclared input stream",
    changes: { "computations.Enricher.inputs": ["requets"] },
    path: "computations.Enricher.inputs[0]",
    phrase: 'stream "requets" is not declared in streams (declared: "requests", "enriched"); did you mean "requests"?',
  },
  {
    name: "undeclared output stream",
    changes: { "computations.Enricher.outputs": ["enriched", "audit"] },
    path: "computations.Enricher.outputs[1]",
    phrase: 'stream "audit" is not declared in streams',
  },
  {
    name: "output that is not a string",
    changes: { "computations.Enricher.outputs": [7] },
    path: "computations.Enricher.outputs[0]",
    phrase: "must be a stream name, got 7",
  },
  {
    name: "zero max_rows_per_batch",
    changes: { "computations.Enricher.max_rows_per_batch": 0 },
    path: "computations.Enricher.max_rows_per_batch",
    phrase: "an integer from 1 to 100000, got 0",
  },
  {
    name: "too large max_rows_per_batch",
    changes: { "computations.Enricher.max_rows_per_batch": 100_001 },
    path: "computations.Enricher.max_rows_per_batch",
    phrase: "got 100001",
  },
  { name: "module that is not a string", changes: { "computations.Enricher.module": 5 }, path: "computations.Enricher.module", phrase: "got 5" },

  // Throttler fields.
  { name: "negative limit", changes: { [`${T}.limit`]: -1 }, path: `${T}.limit`, phrase: "limit must be a finite number ≥ 0, or null for unlimited, got -1" },
  { name: "NaN limit", changes: { [`${T}.limit`]: Number.NaN }, path: `${T}.limit`, phrase: "got NaN" },
  { name: "infinite limit", changes: { [`${T}.limit`]: Number.POSITIVE_INFINITY }, path: `${T}.limit`, phrase: "got Infinity" },
  { name: "limit as a string", changes: { [`${T}.limit`]: "100" }, path: `${T}.limit`, phrase: 'got "100"' },
  { name: "zero period", changes: { [`${T}.period`]: "0s" }, path: `${T}.period`, phrase: "period must be a duration of at least 1ms, got 0ms" },
  { name: "period spelt out", changes: { [`${T}.period`]: "10 seconds" }, path: `${T}.period`, phrase: 'got "10 seconds"' },
  { name: "period as a boolean", changes: { [`${T}.period`]: true }, path: `${T}.period`, phrase: "whole milliseconds (a duration of at least 1ms), got true" },
  { name: "zero request_period", changes: { [`${T}.request_period`]: 0 }, path: `${T}.request_period`, phrase: "of at least 1ms, got 0ms" },
  { name: "zero rpc_timeout", changes: { [`${T}.rpc_timeout`]: "0ms" }, path: `${T}.rpc_timeout`, phrase: "greater than 0ms, got 0ms" },
  {
    name: "zero max_grant_amount",
    changes: { [`${T}.max_grant_amount`]: 0 },
    path: `${T}.max_grant_amount`,
    phrase: "≥ 1 (the smallest chunk worth granting), or null for no cap, got 0",
  },
  {
    name: "fractional max_grant_amount below 1",
    changes: { [`${T}.max_grant_amount`]: 0.5 },
    path: `${T}.max_grant_amount`,
    phrase: "must be a finite number ≥ 1 (the smallest chunk worth granting), or null for no cap, got 0.5",
  },
  { name: "zero max_queue_size", changes: { [`${T}.max_queue_size`]: 0 }, path: `${T}.max_queue_size`, phrase: "an integer ≥ 1, got 0" },
  {
    name: "use_class_weights_as_limit as a string",
    changes: { [`${T}.use_class_weights_as_limit`]: "yes" },
    path: `${T}.use_class_weights_as_limit`,
    phrase: "true or false",
  },
  {
    name: "throttler that is not an object",
    changes: { "dynamic_spec.throttlers.bytes": 5 },
    path: "dynamic_spec.throttlers.bytes",
    phrase: "bytes must be an object, got 5",
  },

  // Retrying channel.
  {
    name: "zero retry_attempts",
    changes: { [`${T}.retrying_channel.retry_attempts`]: 0 },
    path: `${T}.retrying_channel.retry_attempts`,
    phrase: "an integer ≥ 1, got 0",
  },
  {
    name: "backoff_multiplier below 1",
    changes: { [`${T}.retrying_channel.backoff_multiplier`]: 0.5 },
    path: `${T}.retrying_channel.backoff_multiplier`,
    phrase: "≥ 1, got 0.5",
  },
  {
    name: "backoff_jitter above 1",
    changes: { [`${T}.retrying_channel.backoff_jitter`]: 1.5 },
    path: `${T}.retrying_channel.backoff_jitter`,
    phrase: "within [0, 1], got 1.5",
  },
  {
    name: "zero retry_timeout",
    changes: { [`${T}.retrying_channel.retry_timeout`]: 0 },
    path: `${T}.retrying_channel.retry_timeout`,
    phrase: "greater than 0ms",
  },
  {
    name: "min_backoff above max_backoff",
    changes: { [`${T}.retrying_channel.min_backoff`]: "10s" },
    path: `${T}.retrying_channel.max_backoff`,
    phrase: "max_backoff (2000ms) must be at least min_backoff (10000ms)",
  },

  // Classes.
  {
    name: "negative weight",
    changes: { [`${T}.classes.vip.weight`]: -1 },
    path: `${T}.classes.vip.weight`,
    phrase: "weight must be a finite number greater than 0, got -1",
  },
  { name: "zero weight", changes: { [`${T}.classes.vip.weight`]: 0 }, path: `${T}.classes.vip.weight`, phrase: "greater than 0, got 0" },
  { name: "NaN weight", changes: { [`${T}.classes.vip.weight`]: Number.NaN }, path: `${T}.classes.vip.weight`, phrase: "greater than 0, got NaN" },
  { name: "infinite weight", changes: { [`${T}.classes.vip.weight`]: Number.POSITIVE_INFINITY }, path: `${T}.classes.vip.weight`, phrase: "got Infinity" },
  {
    name: "denormal-sized weight",
    changes: { [`${T}.classes.vip.weight`]: 1e-7 },
    path: `${T}.classes.vip.weight`,
    phrase: "weight must be within [0.000001, 1000000], got 1e-7",
  },
  { name: "huge weight", changes: { [`${T}.classes.vip.weight`]: 2e6 }, path: `${T}.classes.vip.weight`, phrase: "within [0.000001, 1000000], got 2000000" },
  { name: "weight as a string", changes: { [`${T}.classes.vip.weight`]: "2" }, path: `${T}.classes.vip.weight`, phrase: 'got "2"' },
  {
    name: 'class named "default"',
    changes: { [`${T}.classes.default`]: { weight: 2 } },
    path: `${T}.classes.default`,
    phrase: '"default" is reserved for the implicit class; choose another class id',
  },
  { name: "empty class id", changes: { [`${T}.classes.`]: { weight: 2 } }, path: `${T}.classes[""]`, phrase: "class id must not be empty" },
  {
    name: "use_class_weights_as_limit without classes",
    changes: { "dynamic_spec.throttlers.bytes": { use_class_weights_as_limit: true } },
    path: "dynamic_spec.throttlers.bytes.use_class_weights_as_limit",
    phrase: "needs at least one class",
  },
  { name: "smooth as a string", changes: { [`${T}.smooth`]: "yes" }, path: `${T}.smooth`, phrase: "true or false" },
  {
    name: "smooth without a limit",
    changes: { "dynamic_spec.throttlers.bytes": { smooth: true } },
    path: "dynamic_spec.throttlers.bytes.smooth",
    phrase: "smooth needs a limit",
  },
  {
    name: "use_class_weights_as_limit with a limit",
    changes: { [`${T}.use_class_weights_as_limit`]: true },
    path: `${T}.limit`,
    phrase: "limit must not be set when use_class_weights_as_limit is true",
  },

  // Computation dynamic settings and references.
  {
    name: "class without its throttler",
    changes: { [`${C}.input_bytes_throttler_id`]: REMOVE, [`${C}.input_bytes_throttler_class_id`]: "vip" },
    path: `${C}.input_bytes_throttler_class_id`,
    phrase: "input_bytes_throttler_class_id is set but input_bytes_throttler_id is not",
  },
  {
    name: "undeclared throttler",
    changes: { [`${C}.input_rows_throttler_id`]: "api_quota" },
    path: `${C}.input_rows_throttler_id`,
    phrase: 'throttler "api_quota" is not declared in dynamic_spec.throttlers (declared: "api", "bytes")',
  },
  {
    name: "class not declared on its throttler",
    changes: { [`${C}.input_rows_throttler_class_id`]: "gold" },
    path: `${C}.input_rows_throttler_class_id`,
    phrase: 'class "gold" is not declared on throttler "api" (declared: "vip", "batch"',
  },
  {
    name: "class declared on another throttler only",
    changes: { [`${C}.input_bytes_throttler_class_id`]: "vip" },
    path: `${C}.input_bytes_throttler_class_id`,
    phrase: 'is not declared on throttler "bytes" (declared: none',
  },
  {
    name: "one throttler for rows and bytes",
    changes: { [`${C}.input_bytes_throttler_id`]: "api" },
    path: `${C}.input_bytes_throttler_id`,
    phrase: "a throttler meters either message count or byte size, not both",
  },
  { name: "empty throttler id", changes: { [`${C}.input_rows_throttler_id`]: "" }, path: `${C}.input_rows_throttler_id`, phrase: "a non-empty throttler id" },
  {
    name: "settings for an undeclared computation",
    changes: { "dynamic_spec.computations.Enrichr": {} },
    path: "dynamic_spec.computations.Enrichr",
    phrase: 'computation "Enrichr" is not declared in computations (declared: "Enricher"); did you mean "Enricher"?',
  },
  { name: "dynamic_spec is an array", changes: { dynamic_spec: [] }, path: "dynamic_spec", phrase: "dynamic_spec must be an object, got an empty array" },
];

describe("validatePipelineSpec on malformed specs", () => {
  it("has a real table", () => {
    assert.ok(cases.length >= 30);
  });

  for (const testCase of cases) {
    it(`${testCase.name} → ${testCase.path}`, () => {
      const input = testCase.spec?.() ?? withChanges(validSpec(), testCase.changes ?? {});
      const result = validatePipelineSpec(input);
      assert.equal(result.ok, false, "the spec was accepted");
      if (result.ok) return;
      const match = result.issues.find((issue) => issue.path === testCase.path && issue.message.includes(testCase.phrase));
      assert.ok(match, `no issue at ${testCase.path} containing ${JSON.stringify(testCase.phrase)}; got:\n${formatIssues(result.issues)}`);
    });
  }
});

describe("issues are reported together", () => {
  it("collects schema errors and every cross-reference error in one pass, sorted by path", () => {
    const broken: SpecObject = withChanges(validSpec(), {
      "streams.requests.partitions": 0,
      "streams.enriched.topic": "requests",
      "computations.Enricher.inputs": ["requests", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
      "computations.Enricher.max_rows_per_batch": 1.5,
      [`${T}.request_periud`]: "1s",
      [`${T}.classes.vip.weight`]: -1,
      [`${C}.input_rows_throttler_class_id`]: "gold",
      [`${C}.input_bytes_throttler_id`]: "nope",
    });
    const result = validatePipelineSpec(broken);
    assert.equal(result.ok, false);
    if (result.ok) return;
    const paths = result.issues.map((issue) => issue.path);
    assert.deepEqual(paths, [
      "computations.Enricher.inputs[1]",
      "computations.Enricher.inputs[2]",
      "computations.Enricher.inputs[3]",
      "computations.Enricher.inputs[4]",
      "computations.Enricher.inputs[5]",
      "computations.Enricher.inputs[6]",
      "computations.Enricher.inputs[7]",
      "computations.Enricher.inputs[8]",
      "computations.Enricher.inputs[9]",
      "computations.Enricher.inputs[10]",
      "computations.Enricher.max_rows_per_batch",
      `${C}.input_bytes_throttler_id`,
      `${C}.input_rows_throttler_class_id`,
      `${T}.classes.vip.weight`,
      `${T}.request_periud`,
      "streams.enriched.topic",
      "streams.requests.partitions",
    ]);
  });

  it("reports a missing key and an unknown key of the same object", () => {
    const result = validatePipelineSpec(withChanges(validSpec(), { "streams.requests.topic": REMOVE, "streams.requests.topik": "x" }));
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.deepEqual(
      result.issues.map((issue) => issue.path),
      ["streams.requests.topic", "streams.requests.topik"],
    );
  });
});
