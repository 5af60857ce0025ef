// services: processes, kafka
// "At most N rows in flight" across processes (docs/design.md §11.2, issue 11 item 5) on the real broker
// (KAFKA_BROKERS): one `sluice controller` and two `sluice worker` processes consume one topic
// through a concurrency throttler applied by automatic input throttling (max_rows_per_batch 1).
// Each row runs a task on a simulated cluster (test/fixtures/cluster-task-computation.ts), which
// counts the tasks running at once: that count, summed over both workers, never exceeds the
// limit. A worker SIGKILLed while its rows hold units gives them back within lease_timeout (+ the
// controller's 250 ms sweep and 1.5 s for a loaded machine), and the other worker goes on.
//
//   KAFKA_BROKERS=127.0.0.1:19092 pnpm test test/e2e/concurrency-workers.test.ts      (about 40 s)
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ControllerSnapshot } from "@sluice/controller";
import { concurrencyTestBed, concurrencyThrottlerSpec } from "../support/concurrency-test-bed.ts";
import { freePorts, servingLeader } from "../support/failover-group.ts";
import { brokers, createTopic, produce, uniqueName } from "../support/kafka.ts";
import { ROOT, sluice, writeSpec } from "../support/processes.ts";

const LIMIT = 5;
const LEASE_MS = 3_000;
const ROWS = 400;
const bed = concurrencyTestBed("lease-workers");
const { cluster, children } = bed;

test("two workers on one topic never have more than limit rows in flight; a SIGKILLed worker's units come back within lease_timeout", {
  timeout: 300_000,
}, async (t) => {
  const clusterUrl = await cluster.start(0);
  const pipeline = uniqueName("lease-workers");
  const input = `${pipeline}-in`;
  await createTopic(input, 8);
  const [port] = await freePorts(1);
  const address = `127.0.0.1:${port}`;
  const spec = writeSpec({
    pipeline,
    kafka: { brokers: await brokers(), session_timeout: "6s" },
    controller: { address },
    streams: { input: { topic: input, partitions: 8 } },
    computations: { Tasks: { module: `${ROOT}/test/fixtures/cluster-task-computation.ts`, inputs: ["input"], outputs: [], max_rows_per_batch: 1 } },
    dynamic_spec: {
      throttlers: { tasks: concurrencyThrottlerSpec(LIMIT, LEASE_MS) },
      computations: { Tasks: { input_rows_throttler_id: "tasks" } },
    },
  });
  const controller = sluice(["controller", spec, "--port", String(port)]);
  children.push(controller);
  await servingLeader<ControllerSnapshot>({ addresses: [address] }, null, 30_000);
  bed.connect(address);
  const tasks = () => bed.throttler("tasks");

  const env = { CLUSTER_URL: clusterUrl, CLUSTER_TASK_WORK: "0.4" };
  const workers = ["w1", "w2"].map((id) => {
    const child = sluice(["worker", spec, "--quiet", "--worker-id", id], env);
    children.push(child);
    return child;
  });
  await Promise.all(workers.map((w) => w.waitFor(/started Tasks/, 120_000, "stderr")));
  await produce(input, ROWS);

  // Both workers run rows, together never more than LIMIT at once.
  const startedAt = Date.now();
  while (Date.now() - startedAt < 25_000 && !workers.every((w) => /cluster tasks done: 20/.test(w.stdout))) {
    assert.ok(cluster.stats().running <= LIMIT, `${cluster.stats().running} rows in flight, limit ${LIMIT}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(
    workers.every((w) => /cluster tasks done: 20/.test(w.stdout)),
    `each worker ran 20 rows: ${workers.map((w) => w.stdout.split("\n").at(-2)).join(" / ")}`,
  );
  const busy = cluster.stats();
  t.diagnostic(`${busy.completed} rows done by both workers, at most ${busy.maxRunning} in flight at once (limit ${LIMIT})`);
  assert.ok(busy.maxRunning <= LIMIT, `${busy.maxRunning} rows in flight at once, limit ${LIMIT}`);
  assert.ok(busy.maxRunning >= LIMIT - 1, `the limit was not used: at most ${busy.maxRunning} in flight`);

  // SIGKILL w1 while the throttler is in use (its rows stop without releasing).
  for (const until = Date.now() + 60_000; ((await tasks()).inUse ?? 0) < LIMIT - 1 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
  const before = await tasks();
  const w1 = workers[0];
  assert.ok(w1);
  w1.kill("SIGKILL");
  const killedAt = Date.now();
  await w1.exited;
  // Each of w1's jobs holds its own lease; all of them end within lease_timeout of the kill.
  let backMs: number | undefined;
  let lastBackMs: number | undefined;
  let expiredUnits = 0;
  let expiredLeases = 0;
  while (Date.now() - killedAt < LEASE_MS + 1_750) {
    const now = await tasks();
    const leases = (now.concurrency?.expiredLeases ?? 0) - (before.concurrency?.expiredLeases ?? 0);
    if (leases > expiredLeases) {
      lastBackMs = Date.now() - killedAt;
      backMs ??= lastBackMs;
      expiredLeases = leases;
      expiredUnits = (now.concurrency?.expiredUnits ?? 0) - (before.concurrency?.expiredUnits ?? 0);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  t.diagnostic(
    `w1 SIGKILLed with ${before.inUse} units in use over ${before.concurrency?.holders} holders; ${expiredUnits} units of ${expiredLeases} ` +
      `leases came back ${backMs}–${lastBackMs} ms after the SIGKILL (lease_timeout ${LEASE_MS} ms)`,
  );
  assert.ok(backMs !== undefined, `none of w1's units came back within ${LEASE_MS + 1_750} ms (lease_timeout ${LEASE_MS} ms)`);
  assert.ok(expiredUnits >= 1);

  // w2 goes on (it takes w1's partitions once the group rebalances), still within the limit.
  const doneBefore = cluster.stats().completed;
  const w2 = workers[1];
  assert.ok(w2);
  // Polled for up to 60 s: w2 takes w1's partitions after the group's session timeout and a
  // rebalance, which a loaded machine stretches.
  for (const until = Date.now() + 60_000; cluster.stats().completed < doneBefore + 20 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
  const end = cluster.stats();
  t.diagnostic(`${end.completed - doneBefore} rows done by w2 after the SIGKILL; at most ${end.maxRunning} in flight over the run`);
  assert.ok(end.completed >= doneBefore + 20, "w2 goes on after w1 is gone");
  assert.ok(end.maxRunning <= LIMIT, `${end.maxRunning} rows in flight at once, limit ${LIMIT}`);
  assert.equal(w2.process.exitCode, null, w2.stderr.slice(-2_000));
  assert.doesNotMatch(w2.stderr, /job \S+ failed|RETRIES_EXHAUSTED/);
});
