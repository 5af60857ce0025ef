// Seed 003 at its own figures, measured by hand as issue 20's Done-when asks (five runs in a row of
// two processes × 300 backlogged calls, by hand and with input throttling): `limit 10, period 1s,
// smooth: true` in front of a PDF generator that refuses the 11th call in any 1,000 ms (a real HTTP
// service, pdf-service.ts) shared by real `sluice run` processes (seed-003-run.ts). The checks are
// the e2e tests' (seed-003-check.ts, test/e2e/seed-003-*.test.ts): 0 refusals, every letter, and
// ≥ 9.5 accepted/s while backlogged.
//
//   node --import tsx test/support/seed-003-measure.ts [--runs N] [--nice N|--no-nice] [--partitions N] [case…]
//     cases: manual, input, one, bursty-input, bursty-one (default: manual input)
//
// Against built packages (as the e2e lane runs them): `pnpm build`, then prefix
// `SLUICE_E2E_BUILT=1` and add `--import ./test/support/use-built-packages.mjs` after tsx.
// Prints one line per run with the load average at its start, and exits 1 when any run misses.
import { loadavg } from "node:os";
import { seed003Figures, seed003Misses } from "./seed-003-check.ts";
import { runSeed003, type Seed003Options } from "./seed-003-run.ts";

const args = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const at = args.indexOf(name);
  if (at < 0) return undefined;
  const [value] = args.splice(at, 2).slice(1);
  return value;
};
const runs = Number(option("--runs") ?? 1);
const noNice = args.includes("--no-nice");
if (noNice) args.splice(args.indexOf("--no-nice"), 1);
const nice = noNice ? undefined : Number(option("--nice") ?? -10);
const partitions = Number(option("--partitions") ?? 2);

const CASES: Record<string, { options: Seed003Options; calls: number; backlogged: boolean }> = {
  manual: { options: { processes: 2, throttling: "manual", arrivals: "backlog", lettersPerProcess: 150, partitions }, calls: 300, backlogged: true },
  input: { options: { processes: 2, throttling: "input", arrivals: "backlog", lettersPerProcess: 150, partitions }, calls: 300, backlogged: true },
  one: { options: { processes: 1, throttling: "manual", arrivals: "backlog", lettersPerProcess: 100, partitions }, calls: 100, backlogged: true },
  "bursty-input": { options: { processes: 2, throttling: "input", arrivals: "bursty", publishMs: 10_000 }, calls: 80, backlogged: false },
  "bursty-one": { options: { processes: 1, throttling: "manual", arrivals: "bursty", publishMs: 10_000 }, calls: 80, backlogged: false },
};

const names = args.length > 0 ? args : ["manual", "input"];
let missed = 0;
for (let run = 1; run <= runs; run++) {
  for (const name of names) {
    const entry = CASES[name];
    if (!entry) throw new Error(`unknown case "${name}"; the cases are ${Object.keys(CASES).join(", ")}`);
    const load = loadavg()
      .map((l) => l.toFixed(1))
      .join(" ");
    const started = new Date().toISOString().slice(11, 19);
    const result = await runSeed003({ ...entry.options, ...(nice === undefined ? {} : { nice }) });
    const misses = seed003Misses(result, { calls: entry.calls, backlogged: entry.backlogged });
    console.log(`run ${run} ${name} ${started} load ${load}: ${seed003Figures(result)} — ${misses.length === 0 ? "ok" : `MISSED (${misses.join("; ")})`}`);
    if (misses.length > 0) missed += 1;
  }
}
process.exit(missed > 0 ? 1 : 0);
