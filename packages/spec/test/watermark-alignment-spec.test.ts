import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIssues, validatePipelineSpec } from "@sluice/spec";

const base = { pipeline: "p", streams: { in: { topic: "in" } } };
const withAlignment = (alignment: unknown) => ({ ...base, computations: { C: { module: "./c.ts", inputs: ["in"], watermark_alignment: alignment } } });

describe("computations.<name>.watermark_alignment", () => {
  it("fills group_name, drift_bound and idle_timeout with their documented defaults", () => {
    const result = validatePipelineSpec(withAlignment({}));
    if (!result.ok) assert.fail(formatIssues(result.issues));
    assert.deepEqual(result.value.computations["C"]?.watermark_alignment, {
      group_name: "default-alignment-group",
      drift_bound: 20 * 60_000,
      idle_timeout: 30_000,
    });
  });

  it("is absent unless asked for", () => {
    const result = validatePipelineSpec({ ...base, computations: { C: { module: "./c.ts", inputs: ["in"] } } });
    assert.ok(result.ok);
    assert.equal(result.value.computations["C"]?.watermark_alignment, undefined);
  });

  it("parses durations and keeps the group name", () => {
    const result = validatePipelineSpec(withAlignment({ group_name: "clicks", drift_bound: "10m", idle_timeout: "5s" }));
    if (!result.ok) assert.fail(formatIssues(result.issues));
    assert.deepEqual(result.value.computations["C"]?.watermark_alignment, { group_name: "clicks", drift_bound: 600_000, idle_timeout: 5_000 });
  });

  it("refuses bad values, each at its JSON path with the value", () => {
    const result = validatePipelineSpec(withAlignment({ group_name: "", drift_bound: "soon", idle_timeout: 0, extra: 1 }));
    assert.ok(!result.ok);
    const byPath = new Map(result.issues.map((issue) => [issue.path, issue.message]));
    assert.match(byPath.get("computations.C.watermark_alignment.group_name") ?? "", /group_name must be a non-empty group name, got ""/);
    assert.match(byPath.get("computations.C.watermark_alignment.drift_bound") ?? "", /drift_bound must be a duration.*got "soon"/);
    assert.match(byPath.get("computations.C.watermark_alignment.idle_timeout") ?? "", /idle_timeout must be a duration greater than 0ms, got 0ms/);
    assert.ok(
      [...byPath.keys()].some((path) => path.startsWith("computations.C.watermark_alignment")) && /extra/.test(formatIssues(result.issues)),
      formatIssues(result.issues),
    );
  });

  it("refuses a non-object", () => {
    const result = validatePipelineSpec(withAlignment("20m"));
    assert.ok(!result.ok);
    assert.match(formatIssues(result.issues), /computations\.C\.watermark_alignment: watermark_alignment must be an object, got "20m"/);
  });
});
