// Seed 003 at its own figures, measured end to end (issue 20, docs/design.md §11.1): `limit 10, period 1s,
// smooth: true` in front of a PDF generator that refuses the 11th call in any 1,000 ms (a real HTTP
// service, pdf-service.ts) shared by real `sluice run` processes (seed-003-run.ts). The goal is 0
// refusals and ≥ 9.5 accepted calls/s while every process is backlogged (the window leaves out the
// start: from a second after the last process's first call to the first process's last).
//
// Not part of `pnpm test`: it does not hold yet (issue 20 is open; on a loaded machine the
// generator still sees refusals and less than 95 %), and a failing test would block every landing.
// Run it by hand, five times in a row, as the issue's Done-when asks:
//
//   node --import tsx test/support/seed-003-measure.ts [case…]     cases: manual, input, one, bursty-input, bursty-one
//
// It prints one line per case and exits 1 when any case misses.
import { runSeed003, type Seed003Options } from "./seed-003-run.ts";

const LIMIT = 10;
const BACKLOGGED_RATE = 0.95 * LIMIT;

const CASES: Record<string, { options: Seed003Options; calls: number; backlogged: boolean }> = {
  manual: { options: { processes: 2, throttling: "manual", arrivals: "backlog", lettersPerProcess: 150 }, calls: 300, backlogged: true },
  input: { options: { processes: 2, throttling: "input", arrivals: "backlog", lettersPerProcess: 150 }, calls: 300, backlogged: true },
  one: { options: { processes: 1, throttling: "manual", arrivals: "backlog", lettersPerProcess: 80, partitions: 3 }, calls: 80, backlogged: true },
  "bursty-input": { options: { processes: 2, throttling: "input", arrivals: "bursty", publishMs: 10_000 }, calls: 80, backlogged: false },
  "bursty-one": { options: { processes: 1, throttling: "manual", arrivals: "bursty", publishMs: 10_000 }, calls: 80, backlogged: false },
};

const names = process.argv.slice(2).length > 0 ? process.argv.slice(2) : Object.keys(CASES);
let missed = 0;
for (const name of names) {
  const entry = CASES[name];
  if (!entry) throw new Error(`unknown case "${name}"; the cases are ${Object.keys(CASES).join(", ")}`);
  const result = await runSeed003(entry.options);
  const b = result.backlogged;
  const misses: string[] = [];
  if (result.refused.length > 0) misses.push(`${result.refused.length} refused`);
  if (result.mostInOneSecond > LIMIT) misses.push(`${result.mostInOneSecond} in one closed 1 s window`);
  if (result.accepted.length !== entry.calls) misses.push(`${result.accepted.length} of ${entry.calls} accepted`);
  if (entry.backlogged && !(b && b.calls >= 20 && b.perSecond >= BACKLOGGED_RATE)) misses.push(`backlogged rate ${b ? b.perSecond.toFixed(2) : "?"}/s < ${BACKLOGGED_RATE}/s`);
  const rate = b ? `, backlogged ${b.calls} calls over ${((b.toMs - b.fromMs) / 1000).toFixed(1)} s = ${b.perSecond.toFixed(2)}/s` : "";
  console.log(`${name}: accepted ${result.accepted.length}, refused ${result.refused.length}, most in any 1 s ${result.mostInOneSecond}${rate} — ${misses.length === 0 ? "ok" : `MISSED (${misses.join("; ")})`}`);
  if (misses.length > 0) missed += 1;
}
process.exit(missed > 0 ? 1 : 0);
