// services: processes, kafka
// `sluice worker --metrics-port` on a real Kafka broker, beside `sluice controller --http-port`: the
// worker's /metrics scraped while it processes, checked against the messages produced and against
// the controller's own counters. The spec names a broker that does not exist; `--brokers` points the
// worker at the real one (what docker-compose.yml does). Every process is ended by its own pid.
import assert from "node:assert/strict";
import { after, it } from "node:test";
import { brokers, createTopic, produce, uniqueName } from "../support/kafka.ts";
import { get, scrape, scrapeUntil } from "../support/prometheus.ts";
import { ROOT, sluice, writeSpec, type Child } from "../support/processes.ts";

const MESSAGES = 400;
const LIMIT = 200;
const PREFETCH_CAP = Math.ceil(LIMIT * 0.2);

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

it("a worker's /metrics count what it processed and agree with the controller's", { timeout: 300_000 }, async () => {
  const name = uniqueName("metrics");
  await createTopic(`${name}-in`, 2);
  await createTopic(`${name}-out`, 2);
  const spec = writeSpec({
    pipeline: name,
    kafka: { brokers: ["127.0.0.1:1"], session_timeout: "6s" },
    streams: { input: { topic: `${name}-in`, partitions: 2 }, out: { topic: `${name}-out`, partitions: 2 } },
    computations: { Relay: { module: `${ROOT}/test/fixtures/relay-computation.ts`, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 50 } },
    dynamic_spec: {
      throttlers: { rows: { limit: LIMIT, period: "1s", request_period: "200ms" } },
      computations: { Relay: { input_rows_throttler_id: "rows" } },
    },
  });
  // The spec's brokers are wrong on purpose (the processes take --brokers). With a kafka section
  // the controller is a failover member (docs/design.md §5.2), so it needs the real brokers as well.
  const controllerChild = sluice(["controller", spec, "--port", "0", "--brokers", (await brokers()).join(",")]);
  children.push(controllerChild);
  const port = Number((await controllerChild.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 120_000))[1]);
  const controller = { child: controllerChild, address: `127.0.0.1:${port}` };
  const worker = sluice([
    "worker",
    spec,
    "--quiet",
    "--worker-id",
    "w1",
    "--controller",
    controller.address,
    "--brokers",
    (await brokers()).join(","),
    "--metrics-port",
    "0",
  ]);
  children.push(worker);
  const metrics = `http://127.0.0.1:${(await worker.waitFor(/sluice worker: metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/))[1]}/metrics`;
  assert.equal((await get(metrics.replace(/metrics$/, "healthz"))).body, "ok\n", "healthz answers while the worker joins its group");
  assert.equal((await get(metrics.replace(/metrics$/, ""))).status, 404, "a worker has no dashboard");

  await worker.waitFor(/started Relay/, 120_000, "stderr");
  await produce(`${name}-in`, MESSAGES);
  const relay = { computation_id: "Relay" };
  const done = await scrapeUntil(metrics, (e) => e.find("sluice_worker_computation_rows_total", relay) === MESSAGES, 60_000, `${MESSAGES} rows processed`);
  const jobs = { ...relay, throttler_id: "rows" };
  assert.equal(done.value("sluice_worker_throttler_consumed_total", jobs), MESSAGES);
  assert.equal(done.value("sluice_worker_computation_failures_total", relay), 0);
  assert.equal(done.value("sluice_worker_computation_active_jobs", relay), 2);
  assert.equal(done.value("sluice_worker_info", { worker_id: "w1", pipeline: name }), 1);
  assert.equal(done.value("sluice_worker_quota_rpc_failures_total", jobs), 0);
  const rpcs = done.value("sluice_worker_quota_rpc_total", jobs);

  // The controller's side of the same run, over its gRPC describe (this controller has no --http-port).
  const { createGrpcQuotaClient } = await import("@sluice/protocol");
  const client = createGrpcQuotaClient(controller.address);
  try {
    const snapshot = JSON.parse((await client.describeThrottlers()).snapshotJson) as {
      throttlers: { counters: { granted: number }; waitTime: { count: number } }[];
    };
    const rows = snapshot.throttlers[0];
    assert.ok(rows);
    assert.ok(rows.counters.granted >= MESSAGES && rows.counters.granted <= MESSAGES + 2 * 2 * PREFETCH_CAP, `controller granted ${rows.counters.granted}`);
    // One wait per RequestQuota; a job's refill may be granted between the scrape and this describe.
    assert.ok(
      rows.waitTime.count >= rpcs && rows.waitTime.count <= rpcs + 2,
      `controller recorded ${rows.waitTime.count} waits for ${rpcs} RequestQuota calls of 2 jobs`,
    );
  } finally {
    client.close();
  }

  worker.kill("SIGTERM");
  assert.equal((await worker.exited).code, 0, worker.stderr);
  await assert.rejects(scrape(metrics), "the metrics port closes with the worker");
});
