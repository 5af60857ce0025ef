#!/usr/bin/env node
// The test lanes (CONTRIBUTING.md, "Tests"). Every *.test.ts under packages/, test/ and examples/
// is found by rule; its lane is what it declares (scripts/test-files.mjs):
//
//   pnpm test [paths…]        type-check beside the unit lane, then the end-to-end lane; without
//                             paths, `pnpm api:check` beside that lane
//   pnpm test:unit [paths…]   unit tests only: no services, all cores, no type-check
//   pnpm test:e2e [paths…]    end-to-end tests only: `pnpm build`, the declared services started
//                             once, the files in SLUICE_E2E_CONCURRENCY slots (default 4; a
//                             `// heavy` file takes two, a `// priority` one more)
//
// Paths narrow the run to the test files under them. Services (a Kafka broker, a Jaeger, a
// Zipkin, a Prometheus) are reused when one is running and otherwise started here and stopped, by their own
// pid, at the end.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism, loadavg, setPriority } from "node:os";
import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { declaredMarkers, runTestFiles, slowest } from "./run-test-files.mjs";
import { classify, DEFAULT_ROOTS, findTests } from "./test-files.mjs";

const root = resolve(fileURLToPath(import.meta.url), "../..");
process.chdir(root);

const args = process.argv.slice(2);
const laneFlag = args.find((a) => a.startsWith("--lane="));
const lane = laneFlag ? laneFlag.slice("--lane=".length) : "all";
if (!["all", "unit", "e2e"].includes(lane)) {
  console.error(`--lane=${lane}: the lanes are unit, e2e and all`);
  process.exit(2);
}
const roots = args.filter((a) => !a.startsWith("--"));
const files = (roots.length > 0 ? roots : DEFAULT_ROOTS)
  .flatMap((r) => findTests(r))
  .map((f) => relative(root, resolve(f)))
  .sort();
if (files.length === 0) {
  console.error(`no *.test.ts files under ${roots.join(", ")}`);
  process.exit(1);
}
const { unit, e2e, problems } = classify(files);
if (problems.length > 0) {
  console.error(`test files in the wrong lane (CONTRIBUTING.md, "Tests"):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(" ");
const timings = [];

async function step(name, run) {
  console.log(`== ${name} (load average ${load()})`);
  const startedAt = Date.now();
  const code = await run();
  timings.push(`${name}: ${code === 0 ? "passed" : `FAILED (exit ${code})`} in ${secs(Date.now() - startedAt)} (load average at the end ${load()})`);
  return code;
}

const totals = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
const failedFiles = [];
const slowSummaries = [];

/** Runs the files in `slots` (a `// heavy` file takes two); unit files of a folder share a process. */
async function runLane(name, testFiles, slots, { env = process.env, batch = false, nodeArgs = [] } = {}) {
  const entries = testFiles.map((file) => ({ file, ...declaredMarkers(readFileSync(file, "utf8")) }));
  const { failed, results, counts, cpuMs, childCpuMs } = await runTestFiles(entries, { slots, env, label: name, batch, nodeArgs });
  for (const [k, v] of Object.entries(counts)) totals[k] += v;
  failedFiles.push(...failed);
  slowSummaries.push(
    `${name}: CPU ${secs(cpuMs)} in the test processes + ${secs(childCpuMs)} in the children they waited for (services not counted); slowest files:\n${slowest(results)}`,
  );
  return failed.length === 0 ? 0 : 1;
}

let failed = 0;
const unitRuns = lane !== "e2e" && unit.length > 0;
const e2eRuns = lane !== "unit" && e2e.length > 0;
// The type-check runs beside the unit lane, which does not need it (its files are compiled by
// esbuild), at a lowered priority so that the unit files' waits on the real clock keep the CPU first;
// the end-to-end lane starts only once it has passed.
const BESIDE_NICE = 10;
const typeCheck =
  lane === "all"
    ? step(
        "type-check (tsc --noEmit)",
        async () => (await runNode([resolve(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], { nice: BESIDE_NICE })).code,
      )
    : Promise.resolve(0);

if (unitRuns) {
  // Unit files mostly compute: one per core, and one more, since some wait on the real clock
  // (deadlines and debts over loopback gRPC) for seconds at a time.
  const slots = availableParallelism() + 1;
  failed ||= await step(`unit lane: ${unit.length} files, ${slots} at a time`, () => runLane("unit lane", unit, slots, { batch: true }));
}
// Once the unit lane has ended, the build (the end-to-end children run dist/) and the services' start
// side by side, beside what is left of the type-check. Not beside the unit lane: it leaves the two
// cores no CPU to spare, and a build beside it (even at a lowered priority) slowed it by about as
// much as the build takes.
const services = !failed && e2eRuns ? startServices(e2e) : undefined;
const build =
  services !== undefined
    ? step("pnpm build (the end-to-end children run dist/)", async () => (await runNode(["scripts/build-packages.mjs"])).code)
    : Promise.resolve(0);
// The whole suite also checks the public surfaces against the committed API reports (`pnpm
// api:check`) in the dist/ just built: once the type-check and the build have passed (not to slow
// them, as the end-to-end lane waits for them), beside the end-to-end lane and at a lowered priority,
// since it only computes, for a quarter of a minute, and the lane mostly waits on timers.
const apiCheck =
  lane === "all" && roots.length === 0 && services !== undefined
    ? Promise.all([typeCheck, build]).then(([typeChecked, built]) =>
        typeChecked === 0 && built === 0
          ? step("API reports (pnpm api:check)", async () => {
              const { code, output } = await runNode(["scripts/api-check.mjs"], { nice: BESIDE_NICE, capture: true });
              console.log(`\n${code === 0 ? "✔" : "✖"} pnpm api:check\n${output.trimEnd()}${code === 0 ? "" : `\n✖ pnpm api:check FAILED: exit ${code}`}\n`);
              return code;
            })
          : undefined,
      )
    : Promise.resolve(undefined);
const [typeChecked, built] = await Promise.all([typeCheck, build]);
if (typeChecked !== 0) {
  await services?.stop();
  await apiCheck;
  console.log(`\n== summary\n${timings.join("\n")}`);
  process.exit(typeChecked);
}
if (services !== undefined) {
  try {
    failed ||= built !== 0 ? built : await runE2e(e2e, services);
  } finally {
    await services.stop();
  }
}
const apiChecked = await apiCheck;
if (apiChecked !== undefined && apiChecked !== 0) {
  failed ||= apiChecked;
  failedFiles.push("pnpm api:check (the public surfaces against packages/*/etc/*.api.md)");
}

console.log(`\n== slowest files\n${slowSummaries.join("\n")}`);
if (failedFiles.length > 0) console.log(`\n== failed files\n  ${failedFiles.join("\n  ")}`);
console.log(`\n== summary\n${timings.join("\n")}`);
console.log(
  `ℹ tests ${totals.tests}\nℹ pass ${totals.pass}\nℹ fail ${totals.fail}\nℹ cancelled ${totals.cancelled}\nℹ skipped ${totals.skipped}\nℹ todo ${totals.todo}`,
);
// The closing line CI reads (the plain form any runner may print); a file that failed without a
// failing test (a crash, a hang) counts as one failure.
console.log(`tests: ${totals.pass} passed, ${Math.max(totals.fail, failedFiles.length)} failed`);
process.exit(failed);

/**
 * A node script as a child process, its output shown as it comes (or kept, with `capture`), at the
 * scheduling priority `nice` where the system allows it (its children inherit it).
 * @returns {Promise<{ code: number, output: string }>}
 */
function runNode(args, { nice = 0, capture = false } = {}) {
  return new Promise((done) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: capture ? ["ignore", "pipe", "pipe"] : "inherit" });
    try {
      if (nice !== 0 && child.pid !== undefined) setPriority(child.pid, nice);
    } catch {
      // Not allowed here: it runs at the default priority.
    }
    let output = "";
    child.stdout?.on("data", (chunk) => (output += chunk));
    child.stderr?.on("data", (chunk) => (output += chunk));
    child.on("error", (error) => (output += `${args.join(" ")}: ${error.message}\n`));
    child.on("close", (code) => done({ code: code ?? 1, output }));
  });
}

/**
 * Starts the services the end-to-end files declare, side by side: the broker's JVM, the Zipkin
 * jar's fetch and start, and the wait for the Jaeger build that .ci/run started in the background
 * each take tens of seconds. `ready` settles once every start has (rejecting with the first
 * failure); `stop()` stops those that started, by their own pid.
 */
function startServices(tests) {
  const needed = new Set(tests.flatMap((t) => t.services));
  const env = { ...process.env, SLUICE_E2E_BUILT: "1" };
  const started = [];
  const starting = [];
  const start = (name, run) => {
    if (!needed.has(name)) return;
    starting.push(
      run().then((service) => {
        started.push(service);
        return service;
      }),
    );
  };
  start("kafka", async () => {
    const { ensureKafka } = await import("./kafka.mjs");
    const kafka = await ensureKafka();
    env.KAFKA_BROKERS = kafka.brokers;
    return kafka;
  });
  start("jaeger", async () => {
    const { ensureJaeger } = await import("./jaeger.mjs");
    const jaeger = await ensureJaeger();
    // Not OTEL_EXPORTER_OTLP_ENDPOINT: every `sluice` child of every test would then trace to Jaeger.
    // Tests that want traces there ask ensureJaeger(), which finds this one running.
    env.JAEGER_OTLP_ENDPOINT = jaeger.otlpHttpEndpoint;
    env.JAEGER_QUERY_URL = jaeger.queryUrl;
    return jaeger;
  });
  start("zipkin", async () => {
    // Fetches the server's jar with Maven on a fresh machine (first use), like the Kafka broker's.
    const { ensureZipkin } = await import("./zipkin.mjs");
    const zipkin = await ensureZipkin();
    // Tests that want it ask ensureZipkin(), which then uses this one and starts nothing.
    env.ZIPKIN_URL = zipkin.url;
    return zipkin;
  });
  start("prometheus", async () => {
    const { ensurePrometheus } = await import("./prometheus.mjs");
    const prometheus = await ensurePrometheus();
    // Tests register their scrape targets as file_sd files under this home (registerScrapeTarget).
    env.PROMETHEUS_URL = prometheus.url;
    // That is the home of the server found running (maybe another checkout's), not necessarily ours.
    env.PROMETHEUS_HOME = prometheus.home;
    return prometheus;
  });
  // Every start settles before a failure is reported, so that stop() stops them all.
  const ready = Promise.allSettled(starting).then((outcomes) => {
    const failedStart = outcomes.find((o) => o.status === "rejected");
    if (failedStart) throw failedStart.reason;
    return env;
  });
  ready.catch(() => {}); // reported by runE2e, which awaits it
  let stopped = false;
  return {
    names: [...needed].sort().join(", "),
    ready,
    async stop() {
      if (stopped) return;
      stopped = true;
      await Promise.allSettled(starting);
      for (const service of started.reverse()) await service.stop();
    },
  };
}

async function runE2e(tests, services) {
  let env;
  try {
    env = await services.ready;
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    return 1;
  }
  // Slots, not files: most end-to-end files wait on their children and services, so four run at
  // once on 2 cores; a `// heavy` file takes two, and a `// priority` one a slot more.
  const concurrency = Number(process.env.SLUICE_E2E_CONCURRENCY ?? 4);
  return await step(`end-to-end lane: ${tests.length} files, ${concurrency} slots (${services.names})`, () =>
    runLane(
      "end-to-end lane",
      tests.map((t) => t.file),
      concurrency,
      // The test files load the packages from dist/ as their children do: the sources through
      // tsx would cost each of them a second or more of CPU, and the lane tests what it built.
      { env, nodeArgs: ["--import", "./test/support/use-built-packages.mjs"] },
    ),
  );
}
