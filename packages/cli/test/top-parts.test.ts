import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { IterationPart } from "@sluice/runtime";
import { addPartSums, partLines, partShares } from "../src/top-parts.ts";

// `sluice top --metrics`: the workers' part sums read from their expositions, and the shares shown.

const exposition = (throttle: number, process: number) =>
  [
    "# TYPE sluice_worker_iteration_part_seconds histogram",
    `sluice_worker_iteration_part_seconds_bucket{computation_id="Squarer",part="Input.Throttle",le="+Inf"} 10`,
    `sluice_worker_iteration_part_seconds_sum{computation_id="Squarer",part="Input.Throttle"} ${throttle}`,
    `sluice_worker_iteration_part_seconds_sum{computation_id="Squarer",part="Process"} ${process}`,
    `sluice_worker_iteration_part_seconds_sum{computation_id="Squarer",part="Output"} 0.6`,
    `sluice_worker_iteration_part_seconds_sum{computation_id="Squarer",part="Commit"} 0.2`,
    `sluice_worker_iteration_part_seconds_sum{computation_id="Idle",part="Process"} 0`,
    `sluice_worker_computation_rows_total{computation_id="Squarer"} 500`,
    "",
  ].join("\n");

describe("top parts", () => {
  it("adds the sums of every endpoint per computation and part, ignoring other families", () => {
    const sums = new Map<string, Record<IterationPart, number>>();
    addPartSums(exposition(6.2, 3), sums);
    addPartSums(exposition(6.2, 3), sums);
    assert.deepEqual(sums.get("Squarer"), { "Input.Throttle": 12.4, Process: 6, Output: 1.2, Commit: 0.4 });
    assert.deepEqual(sums.get("Idle"), { "Input.Throttle": 0, Process: 0, Output: 0, Commit: 0 });
  });

  it("shares since start, or over the interval between two readings; idle when no time passed", () => {
    const sums = new Map<string, Record<IterationPart, number>>();
    addPartSums(exposition(6.2, 3), sums);
    assert.equal(partShares(sums.get("Squarer")!), "throttle 62% · process 30% · output 6% · commit 2%");
    const later = new Map<string, Record<IterationPart, number>>();
    addPartSums(exposition(6.2, 4), later);
    assert.equal(partShares(later.get("Squarer")!, sums.get("Squarer")), "throttle 0% · process 100% · output 0% · commit 0%");
    assert.equal(partShares(sums.get("Idle")!), null);
    const lines = partLines({ sums, errors: ["http://127.0.0.1:1/metrics: fetch failed"] }, undefined, (t) => t);
    assert.match(lines.join("\n"), /^Idle\s+idle$/m);
    assert.match(lines.join("\n"), /^Squarer\s+throttle 62% · process 30% · output 6% · commit 2%$/m);
    assert.match(lines.join("\n"), /since start/);
    assert.match(lines.join("\n"), /✗ http:\/\/127\.0\.0\.1:1\/metrics: fetch failed/);
  });
});
