// services: processes
// priority: its refusals and rate are measured while other files run: its processes get the CPU first
// Seed 003 at its own figures with a full backlog (issue 20, docs/design.md §11.1): `limit 10, period 1s,
// smooth: true` in front of a real HTTP PDF generator that refuses the 11th call in any 1,000 ms
// (test/support/pdf-service.ts), fed by real `sluice run` processes (test/support/seed-003-run.ts)
// — two sharing one `sluice controller`, or one with its embedded controller — that throttle by
// hand (`getThrottlerOrThrow("pdf").throttle(1)`) or automatically (input_rows_throttler_id,
// max_rows_per_batch 1). The generator must refuse nothing, and accept ≥ 9 calls/s while the
// throttler is backlogged (less only by the slots the machine's stalls cost, counted from the
// measured dispatch delay: test/support/seed-003-check.ts); 9.5/s is checked by hand, below.
//
// On a loaded machine: every process of a run gets a raised priority (nice −10) where the system
// allows it (CI runs as root), so that the callers act within a few milliseconds of throttle()
// resolving — the condition the throttler's dispatch guard is stated for (docs/guides/smooth.md);
// the generator's own thread gets −20, above what it measures, and what its own stalls still hide
// is taken back to when the call was sent (seed-003-check.ts, `arrivals`). Each line of figures
// gives the dispatch delays the generator measured. Two jobs per process (two partitions), so that
// a job busy with its previous call does not leave its process's slot without a caller.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seed003Figures, seed003Misses } from "../support/seed-003-check.ts";
import { runSeed003, type Seed003Options } from "../support/seed-003-run.ts";

const NICE = -10;
/**
 * 90 % of the limit in this lane, which shares the machine with other tests: at load averages of
 * 20 and more the two-process runs measured 9.42–9.45/s, a slot lost now and then to process stalls
 * the dispatch delay does not show. The 95 % is measured by hand on a quiet machine
 * (test/support/seed-003-measure.ts, five runs in a row); refusals must be 0 here as there.
 */
const BACKLOGGED_SHARE_UNDER_LOAD = 0.9;
const TIMEOUT_MS = 240_000;

async function check(name: string, options: Seed003Options, calls: number): Promise<void> {
  const result = await runSeed003({ ...options, nice: NICE });
  const figures = seed003Figures(result);
  console.log(`${name}: ${figures}`);
  const misses = seed003Misses(result, { calls, backlogged: true, backloggedShare: BACKLOGGED_SHARE_UNDER_LOAD });
  assert.deepEqual(misses, [], `${name}: ${figures}\n${result.stderr.join("\n---\n")}`);
}

describe("seed 003 at 10/s with a full backlog: 0 refusals, ≥ 9 accepted/s under load", () => {
  it("two processes, throttle(1) by hand, 2 × 80 letters", { timeout: TIMEOUT_MS }, async () => {
    await check("two processes by hand", { processes: 2, throttling: "manual", arrivals: "backlog", lettersPerProcess: 80, partitions: 2 }, 160);
  });

  it("two processes, automatic input throttling, 2 × 80 letters", { timeout: TIMEOUT_MS }, async () => {
    await check("two processes, input throttling", { processes: 2, throttling: "input", arrivals: "backlog", lettersPerProcess: 80, partitions: 2 }, 160);
  });

  it("one process (embedded controller), automatic input throttling, 100 letters", { timeout: TIMEOUT_MS }, async () => {
    await check("one process, input throttling", { processes: 1, throttling: "input", arrivals: "backlog", lettersPerProcess: 100, partitions: 2 }, 100);
  });
});
