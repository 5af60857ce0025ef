// Runs test files as separate `node --import tsx FILE` processes, a bounded number at a time, and
// says how long each took. `node --test` would start one process per file as well, but it neither
// reports a passing file's time nor lets one file count for more than one slot.
//
// - A file's weight is the number of slots it takes: 1, or `HEAVY_WEIGHT` for a file that declares
//   `// heavy` in its opening comment block (it starts many processes or loads the machine by
//   itself), so that it runs beside fewer others.
// - Files start longest first: by the times of the last run on this checkout
//   (test/artifacts/test-times.json, ignored by git), heavy files first on a fresh clone. Starting
//   the long ones first keeps a long file from being the only one left running at the end.
// - Each file's output is printed whole when it ends, so that files running together do not
//   interleave their lines.
//
// Only node built-ins; plain ESM so that it runs before anything is compiled.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname } from "node:path";

export const HEAVY_WEIGHT = 2;
const TIMES_FILE = "test/artifacts/test-times.json";
/** A file still running after this long is killed and counted as failed: a hang, not a slow test. */
const FILE_TIMEOUT_MS = 20 * 60_000;

/** Whether a file's opening comment block has a `// heavy` line. */
export function declaresHeavy(text) {
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "") continue;
    if (!trimmed.startsWith("//")) return false;
    if (/^\/\/\s*heavy\b/.test(trimmed)) return true;
  }
  return false;
}

function readTimes() {
  try {
    return existsSync(TIMES_FILE) ? JSON.parse(readFileSync(TIMES_FILE, "utf8")) : {};
  } catch {
    return {};
  }
}

function writeTimes(times) {
  try {
    mkdirSync(dirname(TIMES_FILE), { recursive: true });
    writeFileSync(TIMES_FILE, `${JSON.stringify(times, null, 2)}\n`);
  } catch {
    // Only an ordering hint for the next run.
  }
}

/** The counts node's test reporter prints last (`ℹ pass 3`), or undefined when it printed none. */
function countsOf(output) {
  const counts = {};
  for (const name of ["tests", "pass", "fail", "cancelled", "skipped", "todo"]) {
    const matches = [...output.matchAll(new RegExp(`^ℹ ${name} (\\d+)$`, "gm"))];
    const last = matches.at(-1);
    if (last) counts[name] = Number(last[1]);
  }
  return counts.tests === undefined ? undefined : counts;
}

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;

/**
 * @param {{ file: string, heavy?: boolean }[]} files
 * @param {{ slots: number, env?: NodeJS.ProcessEnv, label: string }} options
 * @returns {Promise<{ failed: string[], results: { file: string, ms: number, code: number }[], counts: Record<string, number> }>}
 */
export async function runTestFiles(files, { slots, env = process.env, label }) {
  const previous = readTimes();
  const queue = [...files].sort((a, b) => {
    const ta = previous[a.file] ?? (a.heavy ? Number.MAX_SAFE_INTEGER : 0);
    const tb = previous[b.file] ?? (b.heavy ? Number.MAX_SAFE_INTEGER : 0);
    return tb - ta || a.file.localeCompare(b.file);
  });
  const results = [];
  const counts = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
  const failed = [];
  let free = slots;
  const running = new Set();

  const runOne = (entry) =>
    new Promise((done) => {
      const weight = Math.min(slots, entry.heavy ? HEAVY_WEIGHT : 1);
      free -= weight;
      const startedAt = Date.now();
      const child = spawn(process.execPath, ["--import", "tsx", "--test-reporter=spec", entry.file], {
        env: { ...env, FORCE_COLOR: "0" },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      let output = "";
      child.stdout.on("data", (chunk) => (output += chunk));
      child.stderr.on("data", (chunk) => (output += chunk));
      const timer = setTimeout(() => {
        output += `\n${label}: ${entry.file} still running after ${secs(FILE_TIMEOUT_MS)}: killed\n`;
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          child.kill("SIGKILL");
        }
      }, FILE_TIMEOUT_MS);
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        free += weight;
        const ms = Date.now() - startedAt;
        const fileCounts = countsOf(output);
        const exit = code ?? (signal ? 1 : 0);
        const ok = exit === 0 && fileCounts !== undefined && fileCounts.fail === 0;
        if (fileCounts) for (const [k, v] of Object.entries(fileCounts)) counts[k] += v;
        if (!ok) failed.push(entry.file);
        results.push({ file: entry.file, ms, code: exit });
        const head = `${ok ? "✔" : "✖"} ${entry.file} (${secs(ms)}${entry.heavy ? ", heavy" : ""}; load average ${loadavg()[0].toFixed(1)})`;
        console.log(`\n${head}\n${output.trimEnd()}\n${ok ? "" : `✖ ${entry.file} FAILED: exit ${exit}${signal ? ` (${signal})` : ""}${fileCounts ? "" : ", no test summary printed"}\n`}`);
        done();
      });
    });

  await new Promise((allDone) => {
    const pump = () => {
      while (queue.length > 0) {
        // In order: a heavy file waits for its slots rather than being overtaken for ever.
        if (Math.min(slots, queue[0].heavy ? HEAVY_WEIGHT : 1) > free) break;
        const entry = queue.shift();
        const job = runOne(entry).then(() => {
          running.delete(job);
          pump();
        });
        running.add(job);
      }
      if (queue.length === 0 && running.size === 0) allDone();
    };
    pump();
  });

  const times = { ...previous };
  for (const r of results) times[r.file] = r.ms;
  writeTimes(times);
  return { failed, results, counts };
}

/** The slowest files of a run, for the summary. */
export function slowest(results, n = 15) {
  return [...results]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, n)
    .map((r) => `  ${secs(r.ms).padStart(8)}  ${r.file}`)
    .join("\n");
}
