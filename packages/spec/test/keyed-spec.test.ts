import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIssues, keyProblem, KEYED_DEFAULTS, MAX_KEY_BYTES, validateDynamicSpec } from "@sluice/spec";

// `keyed` (docs/design.md §11.4): defaults, overrides restricted to their fields and merged onto the
// template, the input-throttler rule, and the run-time key rule with its figures.

function issuesOf(input: unknown): string {
  const result = validateDynamicSpec(input, { pathPrefix: "dynamic_spec" });
  assert.ok(!result.ok, "the spec is refused");
  return formatIssues(result.issues);
}

describe("keyed throttler spec", () => {
  it('"keyed": {} takes every default; overrides parse durations to ms', () => {
    const result = validateDynamicSpec({
      throttlers: {
        a: { limit: 10, period: "1s", keyed: {} },
        b: {
          limit: 10,
          period: "1s",
          keyed: { max_keys: 100, idle_timeout: "30s", overrides: { acme: { limit: 100, period: "2s", smooth: true } }, top_keys: 3 },
        },
      },
    });
    assert.ok(result.ok, result.ok ? "" : formatIssues(result.issues));
    const a = result.value.throttlers["a"]?.keyed;
    assert.deepEqual(a, { max_keys: KEYED_DEFAULTS.max_keys, idle_timeout: 600_000, overrides: {}, top_keys: KEYED_DEFAULTS.top_keys });
    const b = result.value.throttlers["b"]?.keyed;
    assert.deepEqual(b, { max_keys: 100, idle_timeout: 30_000, overrides: { acme: { limit: 100, period: 2_000, smooth: true } }, top_keys: 3 });
  });

  it("a parsed keyed spec validates again (the controller sends parsed specs to workers)", () => {
    const first = validateDynamicSpec({ throttlers: { a: { limit: 10, keyed: { overrides: { acme: { limit: 1, classes: { gold: { weight: 2 } } } } } } } });
    assert.ok(first.ok);
    const again = validateDynamicSpec(JSON.parse(JSON.stringify(first.value)));
    assert.ok(again.ok, again.ok ? "" : formatIssues(again.issues));
    assert.deepEqual(again.value, first.value);
  });

  it("refuses override fields other than limit, period, smooth, lease_timeout, classes, at their JSON path", () => {
    const text = issuesOf({ throttlers: { api: { limit: 10, keyed: { overrides: { acme: { limit: 5, max_queue_size: 3 } } } } } });
    assert.match(text, /^dynamic_spec\.throttlers\.api\.keyed\.overrides\.acme\.max_queue_size: /);
    assert.match(text, /limit/);
  });

  it("refuses bad figures of keyed and of overrides, all at once", () => {
    const text = issuesOf({
      throttlers: { api: { limit: 10, keyed: { max_keys: 0, idle_timeout: "0s", top_keys: -1, overrides: { acme: { limit: -1 } } } } },
    });
    assert.match(text, /dynamic_spec\.throttlers\.api\.keyed\.max_keys: max_keys must be an integer ≥ 1, got 0/);
    assert.match(text, /dynamic_spec\.throttlers\.api\.keyed\.idle_timeout: .*greater than 0ms/);
    assert.match(text, /dynamic_spec\.throttlers\.api\.keyed\.top_keys: top_keys must be an integer ≥ 0, got -1/);
    assert.match(text, /dynamic_spec\.throttlers\.api\.keyed\.overrides\.acme\.limit: limit must be a finite number ≥ 0/);
  });

  it("checks each override merged onto the template: kind fields, smooth without a limit", () => {
    const text = issuesOf({
      throttlers: {
        tasks: { kind: "concurrency", limit: 4, keyed: { overrides: { acme: { period: "2s" } } } },
        api: { limit: 10, keyed: { overrides: { acme: { lease_timeout: "5s" }, free: { limit: null, smooth: true } } } },
        open: { keyed: { overrides: { x: { smooth: true } } } },
      },
    });
    assert.match(text, /throttlers\.tasks\.keyed\.overrides\.acme\.period: period does not apply to a concurrency throttler/);
    assert.match(text, /throttlers\.api\.keyed\.overrides\.acme\.lease_timeout: lease_timeout applies only to concurrency throttlers/);
    assert.match(text, /throttlers\.api\.keyed\.overrides\.free\.smooth: key "free" would be smooth without a limit/);
    assert.match(text, /throttlers\.open\.keyed\.overrides\.x\.smooth: key "x" would be smooth without a limit/);
  });

  it("refuses an override key that is empty or over 256 UTF-8 bytes", () => {
    const long = "é".repeat(129); // 258 bytes, 129 characters
    const text = issuesOf({ throttlers: { api: { limit: 10, keyed: { overrides: { "": { limit: 1 }, [long]: { limit: 1 } } } } } });
    assert.match(text, /the key is empty/);
    assert.match(text, /the key has 258 UTF-8 bytes .* more than the 256 a key may have/);
  });

  it("a keyed throttler cannot be an automatic input throttler", () => {
    const text = issuesOf({
      throttlers: { per_customer: { limit: 10, keyed: {} } },
      computations: { enrich: { input_rows_throttler_id: "per_customer" } },
    });
    assert.match(
      text,
      /^dynamic_spec\.computations\.enrich\.input_rows_throttler_id: throttler "per_customer" is keyed, so it cannot meter a computation's input/,
    );
  });

  it("keyProblem: empty and too long keys with the figures; 256 bytes is fine", () => {
    assert.match(keyProblem("") ?? "", /empty/);
    assert.equal(keyProblem("a".repeat(MAX_KEY_BYTES)), null);
    assert.match(keyProblem("a".repeat(MAX_KEY_BYTES + 1)) ?? "", /257 UTF-8 bytes/);
    assert.equal(keyProblem("__proto__"), null);
  });
});
