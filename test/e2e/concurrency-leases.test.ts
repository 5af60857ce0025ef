// services: processes
// Concurrency throttlers across processes (issue 11, docs/design.md §11.2): one `sluice controller` and two
// holder processes (test/fixtures/concurrency-holder.ts: @sluice/runtime's throttler client over
// real gRPC) admit tasks to a simulated cluster. The cluster never runs more than `limit` tasks at
// once, and a holder SIGKILLed while it holds units gives them back within lease_timeout (+ the
// controller's 250 ms sweep and 1 s of tolerance for a loaded machine).
//
//   pnpm test test/e2e/concurrency-leases.test.ts
import assert from "node:assert/strict";
import { test } from "node:test";
import { concurrencyTestBed, concurrencyThrottlerSpec } from "../support/concurrency-test-bed.ts";
import { sluice, tsNode, writeSpec } from "../support/processes.ts";

const LIMIT = 6;
const LEASE_MS = 3_000;
const bed = concurrencyTestBed("leases");
const { cluster, children } = bed;
const tasksThrottler = () => bed.throttler("tasks");

test("at most limit tasks run at once across two processes; a SIGKILLed holder's units come back within lease_timeout", async () => {
  const clusterUrl = await cluster.start(0);
  const spec = writeSpec({
    pipeline: "leases",
    streams: {},
    computations: {},
    dynamic_spec: { throttlers: { tasks: concurrencyThrottlerSpec(LIMIT, LEASE_MS) } },
  });
  const controller = sluice(["controller", spec, "--port", "0"]);
  children.push(controller);
  const address = (await controller.waitFor(/listening on (127\.0\.0\.1:\d+)/, 120_000))[1] ?? "";
  bed.connect(address);
  const holder = (clientId: string) => {
    const child = tsNode("test/fixtures/concurrency-holder.ts", [JSON.stringify({ controller: address, throttler: "tasks", clientId, clusterUrl, lanes: 5 })]);
    children.push(child);
    return child;
  };
  const a = holder("holder-a");
  const b = holder("holder-b");
  await Promise.all([a.waitFor(/"ready":true/, 30_000), b.waitFor(/"ready":true/, 120_000)]);
  await Promise.all([a.waitFor(/"done":20/, 30_000), b.waitFor(/"done":20/, 120_000)]);
  const stats = cluster.stats();
  console.log(`# ${stats.completed} tasks done, at most ${stats.maxRunning} running at once (limit ${LIMIT})`);
  assert.ok(stats.maxRunning <= LIMIT, `the cluster ran ${stats.maxRunning} tasks at once, limit ${LIMIT}`);
  assert.ok(stats.maxRunning >= LIMIT - 1, `the limit was not used (${stats.maxRunning} at most)`);

  // SIGKILL A while it holds units: its tasks finish on the cluster, but it never releases them.
  let held = 0;
  for (let i = 0; i < 50 && held === 0; i++) {
    const t = await tasksThrottler();
    held = t.inUse ?? 0;
    if (held === 0) await new Promise((done) => setTimeout(done, 20));
  }
  a.kill("SIGKILL");
  const killedAt = Date.now();
  await a.exited;
  const before = await tasksThrottler();
  assert.ok((before.concurrency?.holders ?? 0) >= 1);
  let back: number | undefined;
  while (Date.now() - killedAt < LEASE_MS + 5_000) {
    const t = await tasksThrottler();
    if ((t.concurrency?.expiredLeases ?? 0) >= 1) {
      back = Date.now() - killedAt;
      break;
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  console.log(`# holder-a SIGKILLed; its units came back after ${back} ms (lease_timeout ${LEASE_MS} ms)`);
  assert.ok(back !== undefined && back <= LEASE_MS + 1_250, `units came back after ${back} ms`);
  // B now gets all the units: the cluster runs up to LIMIT tasks of B's 5 lanes.
  const afterKill = await tasksThrottler();
  assert.equal(afterKill.concurrency?.holders !== undefined && afterKill.concurrency.holders <= 1, true);
  const doneBefore = cluster.stats().completed;
  await new Promise((done) => setTimeout(done, 1_000));
  assert.ok(cluster.stats().completed > doneBefore, "the surviving holder keeps running tasks");
  assert.ok(cluster.stats().maxRunning <= LIMIT);
});
