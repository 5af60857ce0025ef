import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIssues, validateDynamicSpec } from "@sluice/spec";

// `adaptive` (docs/design.md §11.3): defaults, and every inconsistent combination refused with its JSON path.

const load = { prometheus: { url: "http://127.0.0.1:9090", query: "cluster_cpu_utilisation" } };
const base = { load, target: { low: 0.9, high: 0.95 }, max_limit: 100 };

function issuesOf(adaptive: unknown, extra: Record<string, unknown> = {}): string {
  const result = validateDynamicSpec({ throttlers: { tasks: { ...extra, adaptive } } }, { pathPrefix: "dynamic_spec" });
  assert.ok(!result.ok, "expected a refusal");
  return formatIssues(result.issues);
}

describe("adaptive throttler spec", () => {
  it("fills defaults: min_limit 1, interval 5s, dry_run false, initial_limit absent (= min_limit)", () => {
    const result = validateDynamicSpec({ throttlers: { tasks: { adaptive: base } } });
    assert.ok(result.ok, result.ok ? "" : formatIssues(result.issues));
    const adaptive = result.value.throttlers["tasks"]?.adaptive;
    assert.equal(adaptive?.min_limit, 1);
    assert.equal(adaptive?.interval, 5_000);
    assert.equal(adaptive?.dry_run, false);
    assert.equal(adaptive?.initial_limit, undefined);
  });

  it("refuses a fixed limit or class-weight limit beside adaptive", () => {
    assert.match(
      issuesOf(base, { limit: 10 }),
      /^dynamic_spec\.throttlers\.tasks\.limit: limit must not be set together with adaptive .* got 10; remove limit/,
    );
    assert.match(
      issuesOf(base, { use_class_weights_as_limit: true, classes: { a: {} } }),
      /dynamic_spec\.throttlers\.tasks\.use_class_weights_as_limit: use_class_weights_as_limit cannot be combined with adaptive/,
    );
  });

  it("refuses an empty band, crossed bounds and an initial_limit outside them", () => {
    assert.equal(
      issuesOf({ ...base, target: { low: 0.95, high: 0.9 } }),
      "dynamic_spec.throttlers.tasks.adaptive.target.high: target.high (0.9) must be greater than target.low (0.95): the band the loop holds the load in would be empty",
    );
    assert.equal(issuesOf({ ...base, target: { low: 0.9, high: 0.9 } }).includes("adaptive.target.high"), true);
    assert.equal(
      issuesOf({ ...base, min_limit: 10, max_limit: 5 }),
      "dynamic_spec.throttlers.tasks.adaptive.max_limit: max_limit (5) must be at least min_limit (10)",
    );
    assert.equal(
      issuesOf({ ...base, initial_limit: 200 }),
      "dynamic_spec.throttlers.tasks.adaptive.initial_limit: initial_limit must be within [min_limit, max_limit] = [1, 100], got 200",
    );
  });

  it("refuses a load with no source, with both sources, or with a bad URL or query", () => {
    assert.match(issuesOf({ ...base, load: {} }), /adaptive\.load: load needs a source/);
    assert.match(issuesOf({ ...base, load: { ...load, module: "./load.ts" } }), /adaptive\.load\.module: load takes either "prometheus" or "module", not both/);
    assert.match(issuesOf({ ...base, load: { prometheus: { url: "ftp://x", query: "up" } } }), /adaptive\.load\.prometheus\.url: url must be an http\(s\) URL/);
    assert.match(
      issuesOf({ ...base, load: { prometheus: { url: "http://x:9090", query: "" } } }),
      /adaptive\.load\.prometheus\.query: query must be a PromQL expression/,
    );
  });

  it("refuses missing max_limit, non-positive limits, a too short interval and unknown keys", () => {
    const { max_limit: _omitted, ...noMax } = base;
    assert.match(issuesOf(noMax), /adaptive\.max_limit: max_limit is required/);
    assert.match(issuesOf({ ...base, min_limit: 0 }), /adaptive\.min_limit: min_limit must be a finite number greater than 0, got 0/);
    assert.match(issuesOf({ ...base, interval: "10ms" }), /adaptive\.interval: interval must be a duration of at least 100ms, got 10ms/);
    assert.match(issuesOf({ ...base, dryrun: true }), /adaptive/);
  });
});
