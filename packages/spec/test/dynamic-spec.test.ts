import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compareIssuePaths, extractDynamicSpec, formatIssuePath, formatIssues, MAX_ID_LENGTH, throttlerSpecSchema, validateDynamicSpec } from "@sluice/spec";
import { validSpec } from "./fixtures.ts";

describe("validateDynamicSpec", () => {
  it("fills defaults of a bare dynamic_spec", () => {
    const result = validateDynamicSpec({ throttlers: { q: { limit: 5 } } });
    assert.ok(result.ok);
    assert.equal(result.value.throttlers["q"]?.request_period, 5_000);
    assert.deepEqual(result.value.computations, {});
  });

  it("reports paths from the dynamic_spec itself, or under a prefix", () => {
    const bad = { throttlers: { q: { limit: -1 } } };
    const bare = validateDynamicSpec(bad);
    assert.ok(!bare.ok);
    assert.deepEqual(
      bare.issues.map((issue) => issue.path),
      ["throttlers.q.limit"],
    );
    const prefixed = validateDynamicSpec(bad, { pathPrefix: "dynamic_spec" });
    assert.ok(!prefixed.ok);
    assert.deepEqual(
      prefixed.issues.map((issue) => issue.path),
      ["dynamic_spec.throttlers.q.limit"],
    );
  });

  it("checks references to throttlers and classes", () => {
    const result = validateDynamicSpec({
      throttlers: { a: { classes: { x: {} } }, b: {} },
      computations: { C: { input_rows_throttler_id: "api_quota" }, D: { input_rows_throttler_id: "a", input_rows_throttler_class_id: "y" } },
    });
    assert.ok(!result.ok);
    assert.equal(
      formatIssues(result.issues),
      [
        'computations.C.input_rows_throttler_id: throttler "api_quota" is not declared in dynamic_spec.throttlers (declared: "a", "b")',
        'computations.D.input_rows_throttler_class_id: class "y" is not declared on throttler "a" (declared: "x"; "default" is always available)',
      ].join("\n"),
    );
  });

  it("checks computation names only when it is given the list", () => {
    const input = { computations: { Known: {}, Unknown: {} } };
    assert.ok(validateDynamicSpec(input).ok);
    const result = validateDynamicSpec(input, { computations: ["Known"], pathPrefix: "dynamic_spec" });
    assert.ok(!result.ok);
    assert.deepEqual(result.issues, [
      {
        path: "dynamic_spec.computations.Unknown",
        message: 'computation "Unknown" is not declared in computations (declared: "Known")',
      },
    ]);
  });

  it("says when no throttler is declared at all", () => {
    const result = validateDynamicSpec({ computations: { C: { input_bytes_throttler_id: "t" } } });
    assert.ok(!result.ok);
    assert.match(result.issues[0]?.message ?? "", /\(no throttler is declared\)/);
  });

  it("rejects a value that is not an object", () => {
    const result = validateDynamicSpec("throttlers");
    assert.ok(!result.ok);
    assert.deepEqual(result.issues, [{ path: "(root)", message: 'the spec must be an object, got "throttlers"' }]);
  });
});

describe("throttlerSpecSchema alone", () => {
  it("enforces the rules that involve only one throttler", () => {
    assert.equal(throttlerSpecSchema.safeParse({ use_class_weights_as_limit: true }).success, false);
    assert.equal(throttlerSpecSchema.safeParse({ classes: { default: {} } }).success, false);
    assert.equal(throttlerSpecSchema.safeParse({ use_class_weights_as_limit: true, classes: { a: { weight: 2 } } }).success, true);
  });
});

describe("extractDynamicSpec", () => {
  it("takes dynamic_spec out of a whole pipeline spec", () => {
    const spec = validSpec();
    assert.equal(extractDynamicSpec(spec), spec["dynamic_spec"]);
  });

  it("returns a bare dynamic_spec as it is, even though it has computations", () => {
    const bare = { throttlers: {}, computations: { C: {} } };
    assert.equal(extractDynamicSpec(bare), bare);
  });

  it("gives the default for a pipeline spec without dynamic_spec", () => {
    assert.deepEqual(extractDynamicSpec({ pipeline: "p", streams: {}, computations: {} }), {});
  });

  it("passes anything else through for validation to report", () => {
    assert.equal(extractDynamicSpec(42), 42);
    assert.equal(extractDynamicSpec(null), null);
  });
});

describe("issue paths", () => {
  it("formats keys, indexes, odd keys and the root", () => {
    assert.equal(formatIssuePath([]), "(root)");
    assert.equal(formatIssuePath(["computations", "Enricher", "inputs", 0]), "computations.Enricher.inputs[0]");
    assert.equal(formatIssuePath(["streams", "my.stream", "topic"]), 'streams["my.stream"].topic');
    assert.equal(formatIssuePath(["classes", ""]), 'classes[""]');
  });

  it("sorts the root first and indexes as numbers", () => {
    const sorted = ["b", "a.x[10]", "(root)", "a.x[2]", "a"].sort(compareIssuePaths);
    assert.deepEqual(sorted, ["(root)", "a", "a.x[2]", "a.x[10]", "b"]);
  });
});

describe("id lengths", () => {
  it("accepts throttler and class ids of MAX_ID_LENGTH characters and refuses longer ones, quoting only their start", () => {
    const longest = "t".repeat(MAX_ID_LENGTH);
    assert.ok(validateDynamicSpec({ throttlers: { [longest]: { limit: 1, classes: { [longest]: { weight: 1 } } } } }).ok);
    const tooLong = "t".repeat(MAX_ID_LENGTH + 1);
    const result = validateDynamicSpec({ throttlers: { [tooLong]: { limit: 1 }, q: { limit: 1, classes: { [tooLong]: { weight: 1 } } } } });
    assert.ok(!result.ok);
    const quoted = `["${"t".repeat(32)}"… (${MAX_ID_LENGTH + 1} characters)]`;
    assert.deepEqual(
      result.issues.map((issue) => `${issue.path}: ${issue.message}`),
      [
        `throttlers.q.classes${quoted}: class id must be at most ${MAX_ID_LENGTH} characters`,
        `throttlers${quoted}: throttler id must be at most ${MAX_ID_LENGTH} characters`,
      ],
    );
  });
});

// docs/design.md §5.3 (issue 19 item 8): ids are ordinary ids. "__proto__" cannot be one (the schema
// library would drop it without a word), so it is refused by name; "constructor" and "prototype" work.
describe("ids named __proto__, constructor and prototype", () => {
  it("refuses a throttler or class named __proto__ at its path, instead of dropping it", () => {
    const input = JSON.parse('{"throttlers":{"__proto__":{"limit":5},"api":{"limit":1,"classes":{"__proto__":{"weight":2}}}},"computations":{}}') as unknown;
    const result = validateDynamicSpec(input, { pathPrefix: "dynamic_spec" });
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.deepEqual(
      result.issues.map((i) => `${i.path}: ${i.message}`),
      [
        'dynamic_spec.throttlers.__proto__: "__proto__" cannot be used as a name (JavaScript objects reserve it); choose another name',
        'dynamic_spec.throttlers.api.classes.__proto__: "__proto__" cannot be used as a name (JavaScript objects reserve it); choose another name',
      ],
    );
  });

  it("takes throttlers and classes named constructor and prototype as own entries", () => {
    const input = JSON.parse(
      '{"throttlers":{"constructor":{"limit":5,"classes":{"prototype":{"weight":2}}},"prototype":{"limit":1}},"computations":{}}',
    ) as unknown;
    const result = validateDynamicSpec(input);
    assert.ok(result.ok, JSON.stringify(result));
    assert.deepEqual(Object.keys(result.value.throttlers).sort(), ["constructor", "prototype"]);
    assert.equal(Object.getOwnPropertyDescriptor(result.value.throttlers, "constructor")?.value?.limit, 5);
    assert.deepEqual(Object.keys(result.value.throttlers["constructor"]?.classes ?? {}), ["prototype"]);
  });
});
