import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { dynamicSpecJsonSchema, pipelineJsonSchema } from "@sluice/spec";

type Schema = Record<string, unknown>;

function child(schema: unknown, ...keys: string[]): Schema {
  let current = schema;
  for (const key of keys) {
    assert.ok(typeof current === "object" && current !== null, `no ${key} in ${JSON.stringify(current)}`);
    current = (current as Schema)[key];
  }
  assert.ok(typeof current === "object" && current !== null);
  return current as Schema;
}

describe("pipelineJsonSchema", () => {
  const schema = pipelineJsonSchema();
  const throttler = child(schema, "properties", "dynamic_spec", "properties", "throttlers", "additionalProperties");

  it("is plain JSON", () => {
    assert.deepEqual(JSON.parse(JSON.stringify(schema)), schema);
    assert.equal(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert.deepEqual(schema["required"], ["pipeline", "streams", "computations"]);
  });

  it("lists every throttler field, closed to unknown keys", () => {
    assert.deepEqual(Object.keys(child(throttler, "properties")).sort(), [
      "adaptive",
      "classes",
      "keyed",
      "kind",
      "lease_timeout",
      "limit",
      "max_grant_amount",
      "max_queue_size",
      "period",
      "request_period",
      "retrying_channel",
      "rpc_timeout",
      "smooth",
      "use_class_weights_as_limit",
    ]);
    assert.equal(throttler["additionalProperties"], false);
  });

  it("documents durations as a string with a unit or integer milliseconds, with the default as written", () => {
    const period = child(throttler, "properties", "period");
    assert.equal(period["default"], "10s");
    const options = period["anyOf"];
    assert.ok(Array.isArray(options));
    assert.deepEqual(
      options.map((option: Schema) => option["type"]),
      ["string", "integer"],
    );
    assert.equal(typeof (options[0] as Schema)["pattern"], "string");
    assert.ok(new RegExp(String((options[0] as Schema)["pattern"])).test("1.5s"));
  });

  it("keeps descriptions and defaults", () => {
    for (const [name, field] of Object.entries(child(throttler, "properties"))) {
      assert.equal(typeof (field as Schema)["description"], "string", `${name} has no description`);
    }
    assert.equal(child(throttler, "properties", "max_queue_size")["default"], 10_000);
    assert.equal(child(throttler, "properties", "max_queue_size")["type"], "integer");
    assert.equal(child(throttler, "properties", "retrying_channel", "properties", "retry_timeout")["default"], "10m");
    const weight = child(throttler, "properties", "classes", "additionalProperties", "properties", "weight");
    assert.equal(weight["default"], 1);
    assert.equal(weight["minimum"], 1e-6);
  });

  it("describes streams and computations", () => {
    const stream = child(schema, "properties", "streams", "additionalProperties", "properties");
    assert.deepEqual(child(stream, "format")["enum"], ["json", "string", "bytes"]);
    const computation = child(schema, "properties", "computations", "additionalProperties", "properties");
    assert.equal(child(computation, "max_rows_per_batch")["maximum"], 100_000);
  });
});

describe("dynamicSpecJsonSchema", () => {
  it("has throttlers and computations at its top level", () => {
    assert.deepEqual(Object.keys(child(dynamicSpecJsonSchema(), "properties")).sort(), ["computations", "throttlers"]);
  });
});
