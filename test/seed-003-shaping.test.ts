// Seed 003 at its own figures (issue 20, DESIGN §7.1): `limit 10, period 1s, smooth: true` in front
// of a PDF generator that refuses the 11th call in any 1,000 ms — a real HTTP service
// (support/pdf-service.ts) shared by real `sluice run` processes (support/seed-003-run.ts): one
// process with its embedded controller, or two sharing a `sluice controller`; throttled by hand
// (`getThrottlerOrThrow("pdf").throttle(1)`) or automatically (input_rows_throttler_id,
// max_rows_per_batch 1); letters as a full backlog or as the seed's bursty publishers. The service
// counts what it refused (must be 0) and when it accepted; while every process is backlogged it must
// accept ≥ 9.5 calls/s (95 % of the limit; the window is defined in backloggedRate: from a second after
// the last process's first call to the first process's last, so the start is left out).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runSeed003, type Seed003Options, type Seed003Result } from "./support/seed-003-run.ts";

const LIMIT = 10;
/** 95 % of the limit, DESIGN §7.1's promise for a backlogged smooth throttler. */
const BACKLOGGED_RATE = 0.95 * LIMIT;

function describeRun(options: Seed003Options, result: Seed003Result): string {
  const b = result.backlogged;
  return (
    `${options.processes} process(es), ${options.throttling}, ${options.arrivals}: accepted ${result.accepted.length}, refused ${result.refused.length}, ` +
    `most in any 1 s ${result.mostInOneSecond}` +
    (b ? `, backlogged ${b.calls} calls over ${((b.toMs - b.fromMs) / 1000).toFixed(1)} s = ${b.perSecond.toFixed(2)}/s` : "")
  );
}

async function check(t: { diagnostic(message: string): void }, options: Seed003Options, expectedCalls: number): Promise<Seed003Result> {
  const result = await runSeed003(options);
  const summary = describeRun(options, result);
  t.diagnostic(summary);
  const logs = `\n${summary}\n${result.stderr.join("\n---\n")}`;
  assert.equal(result.refused.length, 0, `the PDF generator refused ${result.refused.length} calls${logs}`);
  assert.ok(result.mostInOneSecond <= LIMIT, `${result.mostInOneSecond} calls in one closed 1 s window${logs}`);
  assert.equal(result.accepted.length, expectedCalls, `every letter's call accepted${logs}`);
  return result;
}

function assertBackloggedRate(result: Seed003Result): void {
  const b = result.backlogged;
  assert.ok(b && b.calls >= 20, `a backlogged window of at least 20 calls: ${JSON.stringify(b)}`);
  assert.ok(b.perSecond >= BACKLOGGED_RATE, `accepted ${b.perSecond.toFixed(2)}/s while backlogged, below ${BACKLOGGED_RATE}/s`);
}

describe("seed 003: a PDF generator at 10 calls/s behind a smooth throttler", { timeout: 600_000 }, () => {
  it("two processes, throttle(1) by hand, 300 backlogged calls: 0 refusals, ≥ 9.5 accepted/s while backlogged", async (t) => {
    const options: Seed003Options = { processes: 2, throttling: "manual", arrivals: "backlog", lettersPerProcess: 150 };
    assertBackloggedRate(await check(t, options, 300));
  });

  it("two processes, automatic input throttling (max_rows_per_batch 1), 120 backlogged letters: 0 refusals, ≥ 9.5 accepted/s", async (t) => {
    const options: Seed003Options = { processes: 2, throttling: "input", arrivals: "backlog", lettersPerProcess: 60 };
    assertBackloggedRate(await check(t, options, 120));
  });

  it("one process (embedded controller), throttle(1) by hand, 3 partitions, 80 backlogged letters: 0 refusals, ≥ 9.5 accepted/s", async (t) => {
    const options: Seed003Options = { processes: 1, throttling: "manual", arrivals: "backlog", lettersPerProcess: 80, partitions: 3 };
    assertBackloggedRate(await check(t, options, 80));
  });

  it("two processes, automatic input throttling, the seed's bursty publishers (steady 4/s + 8 every 2 s) for 10 s: 0 refusals", async (t) => {
    await check(t, { processes: 2, throttling: "input", arrivals: "bursty", publishMs: 10_000 }, 80);
  });

  it("one process, throttle(1) by hand, the seed's bursty publishers for 10 s: 0 refusals", async (t) => {
    await check(t, { processes: 1, throttling: "manual", arrivals: "bursty", publishMs: 10_000 }, 80);
  });
});
