// Issue 10's table, re-measurable (not part of `pnpm bench`): for each throttler `pdf` below, runs the
// real CLI, `sluice run <spec> --drain --quiet`, as a child process — three partitions of a `letters`
// stream fed by a steady + burst Observable (smooth-table/letters.ts), a computation that awaits
// `ctx.getThrottlerOrThrow("pdf").throttle(1)` before each call (smooth-table/pdf-calls.ts) — and
// computes from the calls' timestamps: calls/s and the most calls in any closed 1 s window.
//   node --import tsx bench/smooth-table.ts [--letters N] [--only 1,4]
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { mostInClosedWindow } from "./groups/smooth.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const SLUICE_BIN = resolve(HERE, "../packages/cli/bin/sluice.mjs");

interface Row {
  readonly label: string;
  readonly pdf: Record<string, unknown>;
}

const ROWS: readonly Row[] = [
  { label: '`limit 10, period "100ms"`', pdf: { limit: 10, period: "100ms" } },
  { label: '`limit 10, period "100ms", request_period "100ms"`', pdf: { limit: 10, period: "100ms", request_period: "100ms" } },
  { label: '`limit 10, period "1s", request_period "200ms"`', pdf: { limit: 10, period: "1s", request_period: "200ms" } },
  { label: '`limit 10, period "1s"`', pdf: { limit: 10, period: "1s" } },
];

const args = process.argv.slice(2);
const option = (name: string, fallback: string): string => {
  const at = args.indexOf(`--${name}`);
  return at < 0 ? fallback : (args[at + 1] ?? fallback);
};
const letters = Number(option("letters", "300"));
const only = option("only", "").split(",").filter(Boolean).map(Number);

interface Figures {
  readonly calls: number;
  readonly callsPerSecond: number;
  readonly mostIn1s: number;
  /** The same after the first 2 s (a plain throttler's start burst aside). */
  readonly mostIn1sAfter2s: number;
  /** Most calls in any closed window of the throttler's own `period`. */
  readonly mostInPeriod: number;
  readonly periodMs: number;
}

async function measure(pdf: Record<string, unknown>): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-smooth-table-"));
  const callsFile = join(dir, "calls.txt");
  writeFileSync(callsFile, "");
  const spec = {
    pipeline: "smooth-table",
    streams: { letters: { topic: "letters", format: "json", partitions: 3, generator: { module: join(HERE, "smooth-table/letters.ts"), messages: letters } } },
    computations: { PdfCalls: { module: join(HERE, "smooth-table/pdf-calls.ts"), inputs: ["letters"] } },
    dynamic_spec: { throttlers: { pdf } },
  };
  const specPath = join(dir, "pipeline.json");
  writeFileSync(specPath, JSON.stringify(spec, null, 2));
  try {
    const child = spawn(process.execPath, [SLUICE_BIN, "run", specPath, "--drain", "--quiet"], {
      env: { ...process.env, SMOOTH_TABLE_CALLS: callsFile },
      stdio: ["ignore", "ignore", "pipe"],
    });
    const stop = () => child.kill("SIGTERM");
    process.once("SIGINT", stop).once("SIGTERM", stop);
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((done) => child.on("exit", (exitCode) => done(exitCode)));
    process.off("SIGINT", stop).off("SIGTERM", stop);
    if (code !== 0) throw new Error(`sluice run exited with ${code}\n${stderr.slice(-3000)}`);
    const times = readFileSync(callsFile, "utf8")
      .split("\n")
      .filter(Boolean)
      .map(Number)
      .sort((a, b) => a - b);
    if (times.length !== letters) throw new Error(`${times.length} calls for ${letters} letters\n${stderr.slice(-3000)}`);
    const first = times[0] ?? 0;
    const last = times[times.length - 1] ?? 0;
    const periodMs = periodOf(String(pdf["period"] ?? "1s"));
    if (pdf["smooth"] === true) reportFullest(times, periodMs, (Number(pdf["limit"]) * periodMs) / 1000);
    return {
      calls: times.length,
      callsPerSecond: ((times.length - 1) * 1000) / (last - first),
      mostIn1s: mostInClosedWindow(times, 1000),
      mostIn1sAfter2s: mostInClosedWindow(
        times.filter((t) => t >= first + 2000),
        1000,
      ),
      mostInPeriod: mostInClosedWindow(times, periodMs),
      periodMs,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Prints the calls of a closed window of `periodMs` that holds more than `bound` (a smooth throttler's promise broken). */
function reportFullest(times: readonly number[], periodMs: number, bound: number): void {
  let end = 0;
  for (let start = 0; start < times.length; start++) {
    const from = times[start] ?? 0;
    while (end < times.length && (times[end] ?? 0) <= from + periodMs) end++;
    if (end - start > bound) {
      const window = times.slice(start, end).map((t) => `+${(t - from).toFixed(2)}`);
      console.error(`  ${end - start} calls in the closed ${periodMs} ms window from ${from.toFixed(2)}: ${window.join(" ")} ms`);
    }
  }
}

function periodOf(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)$/.exec(text);
  if (!match) throw new Error(`period ${text}: expected "<n>ms" or "<n>s"`);
  return Number(match[1]) * (match[2] === "s" ? 1000 : 1);
}

const lines = [
  "| throttler `pdf` | plain: calls/s | plain: most in any 1 s (after the first 2 s) | `smooth: true`: calls/s | `smooth: true`: most in any 1 s | `smooth: true`: most in any `period` |",
  "|---|---|---|---|---|---|",
];
console.error(`${letters} letters per run (12/s: one every 125 ms and 8 every 2 s), 3 partitions, sluice run --drain`);
for (const [index, row] of ROWS.entries()) {
  if (only.length > 0 && !only.includes(index + 1)) continue;
  const plain = await measure(row.pdf);
  console.error(`${row.label} plain: ${plain.callsPerSecond.toFixed(2)} calls/s, most in 1 s ${plain.mostIn1s} (${plain.mostIn1sAfter2s} after 2 s)`);
  const smooth = await measure({ ...row.pdf, smooth: true });
  console.error(
    `${row.label} smooth: ${smooth.callsPerSecond.toFixed(2)} calls/s, most in 1 s ${smooth.mostIn1s}, most in ${smooth.periodMs} ms ${smooth.mostInPeriod}`,
  );
  lines.push(
    `| ${row.label} | ${plain.callsPerSecond.toFixed(2)} | ${plain.mostIn1s} (${plain.mostIn1sAfter2s}) | ${smooth.callsPerSecond.toFixed(2)} | **${smooth.mostIn1s}** | ${smooth.mostInPeriod} (limit × period ${(10 * smooth.periodMs) / 1000}) |`,
  );
}
console.log(lines.join("\n"));
