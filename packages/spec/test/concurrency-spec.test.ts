import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIssues, validateDynamicSpec, validatePipelineSpec } from "@sluice/spec";

// `kind` and `lease_timeout` (docs/design.md §11.2): defaults, and fields that mean nothing for the kind.

describe("throttler kind", () => {
  it('defaults to "rate" with lease_timeout 30s; "concurrency" parses', () => {
    const result = validateDynamicSpec({ throttlers: { a: { limit: 5 }, b: { kind: "concurrency", limit: 8, lease_timeout: "10s" } } });
    assert.ok(result.ok, result.ok ? "" : formatIssues(result.issues));
    assert.equal(result.value.throttlers["a"]?.kind, "rate");
    assert.equal(result.value.throttlers["a"]?.lease_timeout, 30_000);
    assert.equal(result.value.throttlers["b"]?.kind, "concurrency");
    assert.equal(result.value.throttlers["b"]?.lease_timeout, 10_000);
  });

  it("refuses period and use_class_weights_as_limit on a concurrency throttler, lease_timeout on a rate one, all at once", () => {
    const result = validateDynamicSpec(
      {
        throttlers: {
          tasks: { kind: "concurrency", limit: 8, period: "1s" },
          api: { limit: 5, lease_timeout: "5s", max_queue_size: 0 },
        },
      },
      { pathPrefix: "dynamic_spec" },
    );
    assert.ok(!result.ok);
    assert.equal(
      formatIssues(result.issues),
      [
        'dynamic_spec.throttlers.api.lease_timeout: lease_timeout applies only to concurrency throttlers (this throttler is a rate throttler); remove it, or set "kind": "concurrency"',
        "dynamic_spec.throttlers.api.max_queue_size: max_queue_size must be an integer ≥ 1, got 0",
        'dynamic_spec.throttlers.tasks.period: period does not apply to a concurrency throttler (this throttler counts units in use at once, not a rate over a window); remove period, or set "kind": "rate"',
      ].join("\n"),
    );
  });

  it("accepts a parsed concurrency spec again (defaults filled in are not settings)", () => {
    const first = validateDynamicSpec({ throttlers: { tasks: { kind: "concurrency", limit: 4 } } });
    assert.ok(first.ok);
    const again = validateDynamicSpec(JSON.parse(JSON.stringify(first.value)));
    assert.ok(again.ok, again.ok ? "" : formatIssues(again.issues));
  });

  it("refuses an unknown kind and reports the kind rule in a pipeline file too", () => {
    const bad = validateDynamicSpec({ throttlers: { t: { kind: "semaphore" } } });
    assert.ok(!bad.ok);
    assert.equal(formatIssues(bad.issues), 'throttlers.t.kind: kind must be "rate" or "concurrency", got "semaphore"');
    const pipeline = validatePipelineSpec({
      pipeline: "p",
      streams: {},
      computations: {},
      dynamic_spec: { throttlers: { t: { kind: "concurrency", use_class_weights_as_limit: true } } },
    });
    assert.ok(!pipeline.ok);
    assert.match(
      formatIssues(pipeline.issues),
      /^dynamic_spec\.throttlers\.t\.use_class_weights_as_limit: use_class_weights_as_limit does not apply to a concurrency throttler/,
    );
  });
});
