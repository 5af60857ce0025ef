// The one-line summary `sluice validate` prints: a concurrency limit counts units at once, a rate
// limit units per second, and smooth shaping is named.
import assert from "node:assert/strict";
import { test } from "node:test";
import { pipelineSpecSchema } from "@sluice/spec";
import { summarizeSpec } from "../src/spec-summary.ts";

const spec = (throttlers: Record<string, unknown>) =>
  pipelineSpecSchema.parse({
    pipeline: "p",
    streams: { in: { topic: "in", partitions: 1 } },
    computations: { C: { module: "./c.ts", inputs: ["in"] } },
    dynamic_spec: { throttlers },
  });

test("rate, smooth, concurrency and adaptive throttlers are summarized in their own units", () => {
  const summary = summarizeSpec(
    spec({
      rows: { limit: 500 },
      pdf: { limit: 10, period: "1s", smooth: true },
      tasks: { kind: "concurrency", limit: 8 },
      cores: {
        kind: "concurrency",
        adaptive: { load: { module: "./load.ts" }, target: { low: 0.9, high: 0.95 }, initial_limit: 4, min_limit: 3, max_limit: 200, dry_run: true },
      },
      open: {},
    }),
  );
  assert.equal(
    summary,
    "p: 1 stream, 1 computation, 5 throttlers (rows: 500/s, pdf: 10/s, smooth, tasks: 8 at once, cores: adaptive 3..200 at once (dry run), open: unlimited)",
  );
});
