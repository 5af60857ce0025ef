// Runs test files in child processes, a bounded number of slots at a time, and says how long each
// file took and how much CPU each process and its children used. `node --test` would start one
// process per file as well, but it neither reports a passing file's time nor lets one file count
// for more than one slot.
//
// - Unit files are compiled once, with esbuild (scripts/compile-unit-tests.mjs), and their
//   processes load that JavaScript without tsx: through tsx, each process would resolve and
//   transform the packages' sources again, a second or two of CPU, more than most unit files' tests
//   take. A file that declares `// loads TypeScript at run time` (a .ts module imported by a path
//   computed at run time, such as a computation's fixture) gets tsx as well.
// - Unit files of one folder share a process, up to BATCH_SIZE of them (scripts/test-batch.mjs). A
//   file that declares `// own process` in its opening comment block runs alone (it measures its
//   heap, sets process-wide state, or must not wait behind others).
// - A file that declares `// heavy` runs in a process of its own and takes `HEAVY_WEIGHT` slots: it
//   starts many processes or loads the machine by itself, so it runs beside fewer others. One that
//   declares `// alone` runs once everything else has ended, side by side with the other alone
//   files only (each of them waits on its processes' timers more than it uses a core): not first,
//   where the lane's services (a JVM's start, a broker's first topics) load the machine under them,
//   and not in the middle, where the lane would drain for each.
// - A file that declares `// priority` runs beside the others, but its process and every process it
//   starts run at a raised scheduling priority (nice PRIORITY_NICE, where the system allows it: CI
//   runs as root): its timing assertions then see a machine the rest of the lane does not take the
//   CPU from whenever they need it. It also takes more slots than it would otherwise (one more in
//   a lane of four, two in a lane of five), so it runs beside as few others as in a lane of three,
//   whatever SLUICE_E2E_CONCURRENCY is.
// - Jobs start longest first, by the times of the last run on this checkout
//   (test/artifacts/test-times.json, ignored by git), else by the committed times of a measured run
//   (test/expected-times.json: a clean clone has no times of its own); on a file in neither, jobs
//   with a file that declares `// slow` or `// heavy` first. A long file started last would run
//   alone at the end.
// - A job that needs more slots than are free waits for them, and a shorter job behind it may start
//   meanwhile only when it is expected to end before those slots come free (backfilling with the
//   times above), so that neither a heavy job waits for ever nor slots stay idle behind it.
// - A job's output is printed whole when it ends, so that jobs running together do not interleave.
//
// Only node built-ins (and esbuild, for the unit lane); plain ESM so that it runs before anything is
// compiled.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, setPriority } from "node:os";
import { dirname } from "node:path";
import { compileUnitTests, UNIT_BUILD_DIR } from "./compile-unit-tests.mjs";

export const HEAVY_WEIGHT = 2;
const BATCH_SIZE = 12;
const MIN_BATCH_SIZE = 4;
const TIMES_FILE = "test/artifacts/test-times.json";
/** Times of a measured run, committed: the order of a clean clone's first run. */
const EXPECTED_TIMES_FILE = "test/expected-times.json";
/** What a job without any time is expected to take, for backfilling. */
const UNKNOWN_JOB_MS = 30_000;
/** How long a waiting job may be overtaken by any job that fits, when its slots' time is unknown. */
const HEAD_PATIENCE_MS = 60_000;
/** A `// priority` file runs beside as few others as in a lane of this many slots. */
const PRIORITY_LANE = 3;
/** The scheduling priority of a `// priority` file's processes (−20 highest, 0 the default). */
export const PRIORITY_NICE = -10;
/**
 * A job still running after its limit is killed and counted as failed: a hang, not a slow test. The
 * limit is four times its expected time (the last run's, else the committed one), at least 5 minutes:
 * on CI's loaded 2-core machine a file has taken up to about twice its measured time, and every
 * file's own test timeouts end a stuck test well before; a job with no time of its own gets 10
 * minutes, twice the floor and over twice the slowest file measured. A hang then costs minutes
 * comparable to the file's own, not the whole CI job.
 */
const JOB_TIMEOUT_FLOOR_MS = 5 * 60_000;
const JOB_TIMEOUT_FACTOR = 4;
const UNKNOWN_JOB_TIMEOUT_MS = 10 * 60_000;
/** How long a killed job's output streams may stay open (held by a grandchild) before the job is reported anyway. */
const KILLED_CLOSE_GRACE_MS = 5_000;
const CPU_LINE = /^\[test-process-cpu-ms\] (\d+)(?: (\d+))?$/m;

/** The limit of a job (see JOB_TIMEOUT_FLOOR_MS); SLUICE_TEST_JOB_TIMEOUT_MS overrides it for every job. */
export function jobTimeoutMs(job, env = process.env) {
  const override = Number(env.SLUICE_TEST_JOB_TIMEOUT_MS);
  if (Number.isFinite(override) && override > 0) return override;
  return job.known ? Math.max(JOB_TIMEOUT_FLOOR_MS, JOB_TIMEOUT_FACTOR * job.estimateMs) : UNKNOWN_JOB_TIMEOUT_MS;
}

/** The processes of a hung job's group (pid, elapsed time, command), to say what it was waiting on. */
function describeGroup(pgid) {
  const ps = spawnSync("ps", ["-o", "pid,ppid,etime,args", "-g", String(pgid)], { encoding: "utf8" });
  return ps.status === 0 ? ps.stdout.trimEnd() : `(ps failed: ${ps.error?.message ?? ps.stderr})`;
}
/**
 * The process groups of the jobs running now. The jobs are detached (a group of their own, so that a
 * hung one is killed with its children); an interrupted run kills them, by their group only, so
 * that no test process outlives it.
 */
const runningGroups = new Set();
let interrupted = false;
function killRunningGroups() {
  for (const pgid of runningGroups) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  runningGroups.clear();
}
process.once("exit", killRunningGroups);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  // No job starts after this; the ones running end as failed, and the lane ends as usual (the
  // runner then stops the services it started).
  process.once(signal, () => {
    interrupted = true;
    process.exitCode = 130;
    killRunningGroups();
  });
}

/** The markers (`// heavy`, `// own process`, …) in a file's opening comment block. */
export function declaredMarkers(text) {
  const markers = { heavy: false, ownProcess: false, slow: false, alone: false, priority: false, tsx: false };
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "") continue;
    if (!trimmed.startsWith("//")) break;
    if (/^\/\/\s*heavy\b/.test(trimmed)) markers.heavy = true;
    if (/^\/\/\s*own process\b/.test(trimmed)) markers.ownProcess = true;
    if (/^\/\/\s*slow\b/.test(trimmed)) markers.slow = true;
    if (/^\/\/\s*alone\b/.test(trimmed)) markers.alone = true;
    if (/^\/\/\s*loads TypeScript at run time\b/.test(trimmed)) markers.tsx = true;
    if (/^\/\/\s*priority\b/.test(trimmed)) markers.priority = true;
  }
  return markers;
}

function readTimes(path = TIMES_FILE) {
  try {
    return existsSync(path) ? JSON.parse(readFileSync(path, "utf8")) : {};
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
    const last = [...output.matchAll(new RegExp(`^ℹ ${name} (\\d+)$`, "gm"))].at(-1);
    if (last) counts[name] = Number(last[1]);
  }
  return counts.tests === undefined ? undefined : counts;
}

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;

/**
 * The unit files compiled once (scripts/compile-unit-tests.mjs), or undefined when that failed: the
 * files then run from their sources through tsx, where the one that does not compile fails alone.
 */
async function compileOnce(files) {
  const startedAt = Date.now();
  const outdir = `${UNIT_BUILD_DIR}/${process.pid}`;
  try {
    await compileUnitTests(
      files.map((entry) => entry.file),
      outdir,
    );
    console.log(`compiled ${files.length} unit files with esbuild into ${outdir} in ${secs(Date.now() - startedAt)}`);
    return outdir;
  } catch (error) {
    console.log(`compiling the unit files failed; they run through tsx:\n${error instanceof Error ? error.message : error}`);
    return undefined;
  }
}

/**
 * Jobs: heavy and own-process files alone, the others by folder, BATCH_SIZE at most per job; the
 * folders' remainders under MIN_BATCH_SIZE files together.
 */
function jobsOf(files, batch, times) {
  const jobs = [];
  const byFolder = new Map();
  for (const entry of files) {
    if (!batch || entry.heavy || entry.alone || entry.ownProcess || entry.priority) {
      jobs.push({
        files: [entry.file],
        heavy: entry.heavy,
        alone: entry.alone,
        priority: entry.priority,
        slow: entry.heavy || entry.alone || entry.slow,
        tsx: entry.tsx,
      });
    } else {
      // Files that need tsx share a process only with each other: the others load without it.
      const key = `${dirname(entry.file)}${entry.tsx ? " (tsx)" : ""}`;
      byFolder.set(key, [...(byFolder.get(key) ?? []), entry]);
    }
  }
  const parts = [...byFolder.values()].flatMap((folder) =>
    Array.from({ length: Math.ceil(folder.length / BATCH_SIZE) }, (_, i) => folder.slice(i * BATCH_SIZE, (i + 1) * BATCH_SIZE)),
  );
  // A folder's few files (or the rest of a large one) share a process with other such few, of the
  // same kind: a process of their own would cost more to start than their tests take.
  const few = parts.filter((part) => part.length < MIN_BATCH_SIZE);
  for (const tsx of [false, true]) {
    const kind = few.filter((part) => part.some((e) => e.tsx) === tsx).flat();
    for (let i = 0; i < kind.length; i += BATCH_SIZE) parts.push(kind.slice(i, i + BATCH_SIZE));
  }
  for (const part of parts) {
    if (few.includes(part)) continue;
    jobs.push({ files: part.map((e) => e.file), heavy: false, slow: part.some((e) => e.slow), tsx: part.some((e) => e.tsx) });
  }
  for (const job of jobs) {
    const known = job.files.filter((f) => times[f] !== undefined);
    job.known = known.length > 0;
    job.estimateMs = job.known ? job.files.reduce((s, f) => s + (times[f] ?? 1000), 0) : UNKNOWN_JOB_MS;
    job.cost = job.slow && known.length === 0 ? Number.MAX_SAFE_INTEGER : job.estimateMs;
  }
  // Every `// alone` job last: it needs the whole lane, which is free without waiting only at the
  // end, and the services the lane started are idle by then.
  return jobs.sort((a, b) => Number(Boolean(a.alone)) - Number(Boolean(b.alone)) || b.cost - a.cost || a.files[0].localeCompare(b.files[0]));
}

/**
 * @param {{ file: string, heavy?: boolean, alone?: boolean, ownProcess?: boolean, slow?: boolean, priority?: boolean }[]} files
 * @param {{ slots: number, env?: NodeJS.ProcessEnv, label: string, batch?: boolean, nodeArgs?: string[] }} options
 *   nodeArgs: more node flags for every test process (the end-to-end lane's use-built-packages.mjs)
 */
export async function runTestFiles(files, { slots, env = process.env, label, batch = false, nodeArgs = [] }) {
  const previous = readTimes();
  const build = batch ? await compileOnce(files) : undefined;
  const queue = jobsOf(files, batch, { ...readTimes(EXPECTED_TIMES_FILE), ...previous });
  const results = [];
  const counts = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
  const failed = [];
  let cpuMs = 0;
  let childCpuMs = 0;
  let free = slots;
  /** The jobs running now, with when each is expected to end. */
  const running = new Set();
  // A `// priority` job takes slots − 3 more than it would (at least one): it then runs beside as few
  // others as in a lane of three, which is what its timing assertions were measured against.
  const priorityExtra = Math.max(1, slots - PRIORITY_LANE);
  const weightOf = (job) => (job.alone ? slots : Math.min(slots, (job.heavy ? HEAVY_WEIGHT : 1) + (job.priority ? priorityExtra : 0)));

  const runOne = (job) =>
    new Promise((done) => {
      const weight = weightOf(job);
      free -= weight;
      const startedAt = Date.now();
      const entry = { weight, alone: Boolean(job.alone), endsAt: startedAt + job.estimateMs, known: job.known };
      running.add(entry);
      const target = job.files.length === 1 && build === undefined ? job.files : ["scripts/test-batch.mjs", ...job.files];
      // Compiled unit files load without tsx, unless one of them imports TypeScript at run time.
      const loader = build === undefined ? ["--import", "tsx"] : job.tsx ? ["--enable-source-maps", "--import", "tsx"] : ["--enable-source-maps"];
      // --test-force-exit: once every test and hook of the file has ended, the process exits even
      // when something it started still holds the event loop (a kafkajs client retrying a broker
      // that is gone): the file is done, and waiting for the handle would be a hang.
      const args = [...loader, ...nodeArgs, "--import", "./scripts/report-cpu.mjs", "--test-force-exit", "--test-reporter=spec", ...target];
      const child = spawn(process.execPath, args, {
        env: { ...env, FORCE_COLOR: "0", ...(build === undefined ? {} : { SLUICE_UNIT_BUILD: build }) },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      if (child.pid !== undefined) runningGroups.add(child.pid);
      let prioritised = false;
      if (job.priority && child.pid !== undefined) {
        // Before the test process has loaded, so before it starts any child: they inherit it.
        try {
          setPriority(child.pid, PRIORITY_NICE);
          prioritised = true;
        } catch {
          // Not allowed here (not root, no CAP_SYS_NICE): it runs at the default priority.
        }
      }
      let output = "";
      child.stdout.on("data", (chunk) => (output += chunk));
      child.stderr.on("data", (chunk) => (output += chunk));
      const limitMs = jobTimeoutMs(job, env);
      let closeGrace;
      let hung = false;
      const timer = setTimeout(() => {
        hung = true;
        const expected = job.known ? `expected ${secs(job.estimateMs)}` : "no time of its own";
        output +=
          `\n${label}: HUNG: ${job.files.join(", ")} still running after ${secs(limitMs)} (${expected}; the limit is ` +
          `max(${secs(JOB_TIMEOUT_FLOOR_MS)}, ${JOB_TIMEOUT_FACTOR} × expected), or ${secs(UNKNOWN_JOB_TIMEOUT_MS)} without a time): ` +
          `SIGKILLing its process group ${child.pid}, which held:\n${describeGroup(child.pid)}\n`;
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          child.kill("SIGKILL");
        }
        // A grandchild in a group of its own may hold the output pipes open: report the job anyway.
        closeGrace = setTimeout(() => finish(null, "SIGKILL"), KILLED_CLOSE_GRACE_MS);
      }, limitMs);
      let finished = false;
      const finish = (code, signal) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        clearTimeout(closeGrace);
        child.stdout.destroy();
        child.stderr.destroy();
        runningGroups.delete(child.pid);
        free += weight;
        running.delete(entry);
        const ms = Date.now() - startedAt;
        const cpuMatch = CPU_LINE.exec(output);
        const cpu = Number(cpuMatch?.[1] ?? Number.NaN);
        const childCpu = Number(cpuMatch?.[2] ?? Number.NaN);
        if (Number.isFinite(cpu)) cpuMs += cpu;
        if (Number.isFinite(childCpu)) childCpuMs += childCpu;
        output = output.replace(CPU_LINE, "").trimEnd();
        const jobCounts = countsOf(output);
        const exit = code ?? (signal ? 1 : 0);
        const ok = exit === 0 && jobCounts !== undefined && jobCounts.fail === 0;
        if (jobCounts) for (const [k, v] of Object.entries(jobCounts)) counts[k] += v;
        const cpuText = Number.isFinite(cpu) ? `, CPU ${secs(cpu)}${Number.isFinite(childCpu) ? ` + children ${secs(childCpu)}` : ""}` : "";
        if (job.files.length === 1) {
          results.push({ file: job.files[0], ms, cpuMs: cpu, childCpuMs: childCpu, hung });
          if (!ok) failed.push(job.files[0]);
        } else {
          // The batch's suites, one per file, at the top level of the spec report.
          for (const file of job.files) {
            const line = new RegExp(`^(✔|✖) ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} \\(([\\d.]+)ms\\)$`, "m").exec(output);
            results.push({ file, ms: line ? Number(line[2]) : ms, cpuMs: Number.NaN, childCpuMs: Number.NaN, batch: true, hung: hung && !line });
            if (!ok && (!line || line[1] === "✖")) failed.push(file);
          }
        }
        const folders = [...new Set(job.files.map((f) => dirname(f)))];
        const what = job.files.length === 1 ? job.files[0] : `${job.files.length} files of ${folders.join(", ")} in one process`;
        const how = job.alone ? ", alone" : job.heavy ? ", heavy" : "";
        const head = `${ok ? "✔" : "✖"} ${what} (${secs(ms)}${cpuText}${how}${prioritised ? `, nice ${PRIORITY_NICE}` : ""}; load average ${loadavg()[0].toFixed(1)})`;
        console.log(
          `\n${head}\n${output}\n${ok ? "" : `✖ ${what} FAILED: exit ${exit}${signal ? ` (${signal})` : ""}${jobCounts ? "" : ", no test summary printed"}\n`}`,
        );
        done();
      };
      child.on("close", finish);
    });

  /**
   * When `weight` slots will be free, by the running jobs' expected ends; undefined when that rests
   * on a job whose time is unknown or already past (it could end any moment, or much later).
   */
  const freeAt = (weight) => {
    const now = Date.now();
    let available = free;
    for (const r of [...running].sort((a, b) => a.endsAt - b.endsAt)) {
      available += r.weight;
      if (available >= weight) return r.known && r.endsAt > now ? r.endsAt : undefined;
    }
    return undefined;
  };

  await new Promise((allDone) => {
    const pump = () => {
      if (interrupted) queue.splice(0);
      for (;;) {
        const head = queue[0];
        if (head === undefined) break;
        if (head.alone ? [...running].every((r) => r.alone) : weightOf(head) <= free) {
          runOne(queue.shift()).then(pump);
          continue;
        }
        // The head waits for its slots; a job that fits now and ends before they free may go first.
        // When that time is not known, any job that fits may, for HEAD_PATIENCE_MS of the head's
        // wait; after that the slots are kept for the head as they come free.
        head.waitingSince ??= Date.now();
        const headStartsAt = freeAt(weightOf(head));
        const patient = headStartsAt === undefined && Date.now() - head.waitingSince < HEAD_PATIENCE_MS;
        const fill = queue.findIndex(
          (job, i) => i > 0 && !job.alone && weightOf(job) <= free && (patient || (headStartsAt !== undefined && Date.now() + job.estimateMs <= headStartsAt)),
        );
        if (fill < 0) break;
        runOne(queue.splice(fill, 1)[0]).then(pump);
      }
      if (queue.length === 0 && running.size === 0) allDone();
    };
    pump();
  });

  const times = { ...previous };
  // A hung file's time is its limit, not what it takes: it would raise its next limit fourfold. A
  // failed file's time may be that of a fast failure: it would lower its next limit and order.
  const failedFiles = new Set(failed);
  for (const r of results) if (!r.hung && !failedFiles.has(r.file)) times[r.file] = r.ms;
  writeTimes(times);
  if (build !== undefined) rmSync(build, { recursive: true, force: true });
  return { failed, results, counts, cpuMs, childCpuMs };
}

/** The slowest files of a run, for the summary. */
export function slowest(results, n = 15) {
  return [...results]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, n)
    .map(
      (r) =>
        `  ${secs(r.ms).padStart(8)}${Number.isFinite(r.cpuMs) ? `  CPU ${secs(r.cpuMs).padStart(8)}${Number.isFinite(r.childCpuMs) ? ` + children ${secs(r.childCpuMs).padStart(8)}` : ""}` : r.batch ? "  (in a batch)  " : ""}  ${r.file}`,
    )
    .join("\n");
}
