// services: processes
// `sluice run --http-port`: one port for the whole process — the embedded controller's dashboard,
// /api/snapshot and metrics, and the worker's metrics — scraped while the pipeline runs, and checked
// against what it processed (the rows the generator wrote, the bytes its summary line reports).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, it } from "node:test";
import { get, scrape, scrapeUntil } from "../support/prometheus.ts";
import { NOOP_COMPUTATION, ROOT, sluice, writeSpec, type Child } from "../support/processes.ts";

const MESSAGES = 600;
const LIMIT = 300;
/** Per job: ceil(limit × request_period). */
const PREFETCH_CAP = Math.ceil(LIMIT * 0.2);

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

it("sluice run serves the dashboard and the metrics of its controller and worker on one port", { timeout: 300_000 }, async () => {
  const spec = writeSpec({
    pipeline: "run-metrics",
    streams: { numbers: { topic: "numbers", partitions: 2, generator: { module: join(ROOT, "test/fixtures/sequence-generator.ts"), messages: MESSAGES } } },
    computations: { Relay: { module: NOOP_COMPUTATION, inputs: ["numbers"], outputs: [], max_rows_per_batch: 50 } },
    dynamic_spec: {
      throttlers: { rows: { limit: LIMIT, period: "1s", request_period: "200ms" } },
      computations: { Relay: { input_rows_throttler_id: "rows" } },
    },
  });
  const run = sluice(["run", spec, "--http-port", "0", "--quiet"]);
  children.push(run);
  const base = `http://127.0.0.1:${(await run.waitFor(/sluice run: dashboard on http:\/\/127\.0\.0\.1:(\d+)\//))[1]}`;

  const page = await get(`${base}/`);
  assert.equal(page.status, 200);
  assert.match(page.type, /^text\/html/);
  assert.match(page.body, /<title>Sluice · pipeline &#34;run-metrics&#34;<\/title>/);
  const snapshot = JSON.parse((await get(`${base}/api/snapshot`)).body) as { throttlers: { id: string; limit: number }[] };
  assert.deepEqual(
    snapshot.throttlers.map((t) => [t.id, t.limit]),
    [["rows", LIMIT]],
  );
  assert.equal((await get(`${base}/nothing-here`)).status, 404);

  // 600 rows at 300/s after a first bucket of 300: about a second of throttling.
  const relay = { computation_id: "Relay" };
  const done = await scrapeUntil(
    `${base}/metrics`,
    (e) => e.find("sluice_worker_computation_rows_total", relay) === MESSAGES,
    30_000,
    `${MESSAGES} rows processed`,
  );
  const jobs = { ...relay, throttler_id: "rows" };
  assert.equal(done.value("sluice_worker_throttler_consumed_total", jobs), MESSAGES, "automatic input throttling takes one unit per row");
  assert.equal(done.value("sluice_worker_throttler_released_total", jobs), 0);
  const granted = done.value("sluice_controller_throttler_granted_total", { throttler_id: "rows" });
  assert.ok(granted >= MESSAGES && granted <= MESSAGES + 2 * 2 * PREFETCH_CAP, `controller granted ${granted} for ${MESSAGES} rows consumed by 2 jobs`);
  assert.ok(done.value("sluice_worker_computation_iterations_total", relay) >= MESSAGES / 50);
  assert.equal(done.value("sluice_worker_computation_failures_total", relay), 0);
  assert.equal(done.value("sluice_worker_computation_active_jobs", relay), 2, "one job per partition");
  assert.ok(done.value("sluice_worker_computation_throttle_wait_ms_total", relay) > 0, "the iterations waited for quota");
  const lag = done.value("sluice_worker_computation_lag_ms", relay);
  assert.ok(lag >= 0 && lag < 60_000, `lag ${lag} ms`);
  const rpcs = done.value("sluice_worker_quota_rpc_total", jobs);
  assert.ok(rpcs >= 2, `${rpcs} RequestQuota calls for 2 jobs`);
  assert.equal(done.value("sluice_worker_quota_rpc_failures_total", jobs), 0);
  // Waits are recorded only when the local pool could not answer; the controller saw every RPC.
  const waits = done.value("sluice_worker_throttler_wait_time_ms_count", jobs);
  assert.ok(waits >= 1 && waits <= done.value("sluice_worker_computation_iterations_total", relay), `${waits} throttle() calls waited`);
  assert.ok(done.value("sluice_worker_throttler_wait_time_ms_max", jobs) > 0);
  // One controller wait per RequestQuota; a job's refill may be granted before the job has seen the answer.
  const controllerWaits = done.value("sluice_controller_throttler_wait_time_ms_count", { throttler_id: "rows" });
  assert.ok(controllerWaits >= rpcs && controllerWaits <= rpcs + 2, `controller recorded ${controllerWaits} waits for ${rpcs} RequestQuota calls of 2 jobs`);
  assert.equal(done.value("sluice_worker_info", { pipeline: "run-metrics" }), 1);
  const bytes = done.value("sluice_worker_computation_bytes_total", relay);

  // The metrics reference (docs/reference/metrics.md, generated from the registry) documents exactly
  // the families a run exposes (controller and worker), beside those only a failover group has.
  const reference = readFileSync(join(ROOT, "docs/reference/metrics.md"), "utf8");
  const failoverOnly = (name: string) => /^sluice_controller_(failover_|state_write_errors)/.test(name);
  const documented = new Map(
    [...reference.matchAll(/^\| `(sluice_[a-z_]+)` \| (\w+)\b/gm)]
      .map((m): [string, string] => [m[1] ?? "", m[2] ?? ""])
      .filter(([name]) => !failoverOnly(name)),
  );
  const sluiceFamilies = new Map([...done.types].filter(([name]) => name.startsWith("sluice_")));
  assert.deepEqual([...documented.keys()].sort(), [...sluiceFamilies.keys()].sort(), "metrics reference vs /metrics families");
  for (const [name, type] of sluiceFamilies) assert.equal(documented.get(name), type, `the metrics reference gives ${name} the type ${type}`);
  // Beside them, prom-client's default process and Node.js families (docs/operations/observability.md names a few).
  for (const name of [
    "process_cpu_user_seconds_total",
    "process_resident_memory_bytes",
    "nodejs_eventloop_lag_seconds",
    "nodejs_heap_size_used_bytes",
    "nodejs_gc_duration_seconds",
  ]) {
    assert.ok(done.types.has(name), `${name} (collectDefaultMetrics) missing from /metrics`);
  }
  assert.deepEqual(
    [...done.types.keys()].filter((name) => !/^(sluice|process|nodejs)_/.test(name)),
    [],
    "families from neither Sluice nor collectDefaultMetrics",
  );

  // The summary line at exit tells the same story.
  run.kill("SIGTERM");
  assert.equal((await run.exited).code, 0, run.stderr);
  const summary = /Relay: processed (\d+) rows \((\d+) bytes\)/.exec(run.stdout);
  assert.ok(summary, run.stdout);
  assert.equal(Number(summary[1]), MESSAGES);
  assert.equal(Number(summary[2]), bytes, "bytes_total equals the summary's bytes");
  await assert.rejects(scrape(`${base}/metrics`), "the port is closed after exit");
});
