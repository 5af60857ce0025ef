import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONTROLLER_DEFAULTS, validatePipelineSpec } from "@sluice/spec";

const base = {
  pipeline: "bounded",
  streams: { in: { topic: "in" } },
  computations: { C: { module: "./c.ts", inputs: ["in"] } },
};

// docs/design.md §5.3: `controller.max_open_calls_per_stream` bounds what one QuotaStream holds open.
describe("controller.max_open_calls_per_stream", () => {
  it("defaults to 4096 when a controller section is given", () => {
    const result = validatePipelineSpec({ ...base, controller: { address: "127.0.0.1:7070" } });
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.value.controller?.max_open_calls_per_stream, 4_096);
    assert.equal(CONTROLLER_DEFAULTS.max_open_calls_per_stream, 4_096);
  });

  it("takes an integer from 1 to 1,000,000", () => {
    const result = validatePipelineSpec({ ...base, controller: { max_open_calls_per_stream: 64 } });
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.value.controller?.max_open_calls_per_stream, 64);
  });

  for (const bad of [0, -1, 1.5, 2_000_000, "4096"]) {
    it(`refuses ${JSON.stringify(bad)}, naming the field and the rule`, () => {
      const result = validatePipelineSpec({ ...base, controller: { max_open_calls_per_stream: bad } });
      assert.equal(result.ok, false);
      if (result.ok) return;
      const issue = result.issues.find((i) => i.path === "controller.max_open_calls_per_stream");
      assert.ok(issue, JSON.stringify(result.issues));
      assert.match(issue.message, /1 to 1000000|1,000,000|an integer/);
    });
  }
});
