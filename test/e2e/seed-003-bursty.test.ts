// services: processes
// priority: its refusals and rate are measured while other files run: its processes get the CPU first
// Seed 003 at its own figures with its own publishers (issue 20, docs/design.md §11.1): one letter every
// 250 ms and 8 letters every 2 s (8/s on average, bursts above the limit), through `limit 10,
// period 1s, smooth: true` to a real HTTP PDF generator that refuses the 11th call in any
// 1,000 ms (test/support/pdf-service.ts). One `sluice run` with its embedded controller and
// automatic input throttling, and two `sluice run`s sharing one `sluice controller` (one runs the
// steady publisher, the other the bursts) throttling by hand. The generator must refuse nothing
// and receive every letter. Priority and dispatch delays as in seed-003-backlog.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seed003Figures, seed003Misses } from "../support/seed-003-check.ts";
import { runSeed003, type Seed003Options } from "../support/seed-003-run.ts";

const NICE = -10;
const TIMEOUT_MS = 240_000;
const PUBLISH_MS = 10_000;

async function check(name: string, options: Seed003Options, calls: number): Promise<void> {
  const result = await runSeed003({ ...options, nice: NICE });
  const figures = seed003Figures(result);
  console.log(`${name}: ${figures}`);
  assert.deepEqual(seed003Misses(result, { calls, backlogged: false }), [], `${name}: ${figures}\n${result.stderr.join("\n---\n")}`);
}

describe("seed 003 at 10/s with bursty publishers: 0 refusals, every letter delivered", () => {
  it("one process, automatic input throttling", { timeout: TIMEOUT_MS }, async () => {
    await check("one process, input throttling", { processes: 1, throttling: "input", arrivals: "bursty", publishMs: PUBLISH_MS }, 80);
  });

  it("two processes, throttle(1) by hand", { timeout: TIMEOUT_MS }, async () => {
    await check("two processes by hand", { processes: 2, throttling: "manual", arrivals: "bursty", publishMs: PUBLISH_MS }, 80);
  });
});
