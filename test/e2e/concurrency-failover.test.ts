// services: processes, kafka
// Concurrency leases across a controller failover (docs/design.md §11.2, §5.2) on the real broker
// (KAFKA_BROKERS): two `sluice controller` processes of one pipeline, a simulated cluster, and two
// holder processes (test/fixtures/concurrency-holder.ts, following the leader). Holder A runs long
// tasks on every unit; the leader is SIGKILLed while A's tasks run; holder B starts asking at once.
// The successor must start with A's units in use (they were persisted with the balances), keep
// them while A renews with it, and never let the cluster run more than `limit` tasks at once. Had
// it started with all units free, B's tasks would run beside A's: 2 × limit. Then A is SIGKILLed
// too, still holding every unit: the successor gives them back within lease_timeout.
//
//   KAFKA_BROKERS=127.0.0.1:19092 pnpm test test/e2e/concurrency-failover.test.ts      (about 40 s)
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ControllerSnapshot } from "@sluice/controller";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { concurrencyTestBed, concurrencyThrottlerSpec } from "../support/concurrency-test-bed.ts";
import { freePorts, servingLeader, startControllers } from "../support/failover-group.ts";
import { brokers, uniqueName } from "../support/kafka.ts";
import { tsNode, writeSpec } from "../support/processes.ts";

const LIMIT = 4;
/** Shorter than the time from the SIGKILL to the end of A's tasks: A's lease must be renewed with the successor. */
const LEASE_MS = 6_000;
/** Each of A's tasks runs this long (core-seconds on an idle 64-core cluster): it spans the failover. */
const LONG_TASK_S = 22;

const { cluster, children } = concurrencyTestBed("lease-failover");

const tasksOf = (snapshot: ControllerSnapshot) => {
  const t = snapshot.throttlers.find((x) => x.id === "tasks");
  assert.ok(t, JSON.stringify(snapshot));
  return t;
};

test("units in use survive a leader change: the successor counts the old holders' units and the cluster never runs more than limit tasks", {
  timeout: 300_000,
}, async (t) => {
  const clusterUrl = await cluster.start(0);
  const pipeline = uniqueName("lease-failover");
  const addresses = (await freePorts(2)).map((port) => `127.0.0.1:${port}`);
  const spec = writeSpec({
    pipeline,
    kafka: { brokers: await brokers(), session_timeout: "6s" },
    controller: { addresses },
    streams: {},
    computations: {},
    dynamic_spec: { throttlers: { tasks: concurrencyThrottlerSpec(LIMIT, LEASE_MS) } },
  });
  const controllers = await startControllers(spec, addresses, children);
  const first = await servingLeader<ControllerSnapshot>({ addresses }, null, 30_000);
  t.diagnostic(`first leader ${first.address}`);

  const holder = (clientId: string, work: number) => {
    const child = tsNode("test/fixtures/concurrency-holder.ts", [
      JSON.stringify({ controller: addresses.join(","), throttler: "tasks", clientId, clusterUrl, lanes: LIMIT, work }),
    ]);
    children.push(child);
    return child;
  };
  const a = holder("holder-a", LONG_TASK_S);
  await a.waitFor(/"ready":true/, 120_000);
  const aStartedAt = Date.now();
  // Polled for up to 60 s: A's lanes start as fast as a loaded machine runs its process.
  for (const until = Date.now() + 60_000; cluster.stats().running < LIMIT && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
  assert.equal(cluster.stats().running, LIMIT, "A's lanes took every unit");

  controllers.get(first.address)?.kill("SIGKILL");
  const killedAt = Date.now();
  const b = holder("holder-b", 0.2);
  await b.waitFor(/"ready":true/, 120_000);
  const successor = await servingLeader<ControllerSnapshot>({ addresses }, first.address, 20_000);
  const failoverMs = Date.now() - killedAt;
  const restored = tasksOf(successor.snapshot);
  t.diagnostic(
    `successor ${successor.address} served ${failoverMs} ms after the SIGKILL with ${restored.inUse} units in use, ${restored.concurrency?.holders} holders`,
  );
  assert.equal(restored.inUse, LIMIT, "the successor starts with A's units in use, not free");
  assert.equal(restored.concurrency?.holders, 1);

  // Until A's long tasks end, B gets nothing: the cluster runs exactly A's LIMIT tasks.
  const aEndsAt = aStartedAt + LONG_TASK_S * 1_000;
  assert.ok(Date.now() + LEASE_MS < aEndsAt, "the run must outlast a lease_timeout after the failover (a loaded machine took too long)");
  while (Date.now() < aEndsAt - 1_000) {
    const running = cluster.stats().running;
    assert.ok(
      running <= LIMIT,
      `the cluster runs ${running} tasks, limit ${LIMIT}, ${Date.now() - killedAt} ms after the SIGKILL; successor's log:\n${controllers.get(successor.address)?.stderr}${controllers.get(successor.address)?.stdout}\nA: ${a.stderr}`,
    );
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.doesNotMatch(b.stdout, /"done"/, "B ran no task while A held every unit");
  const held = tasksOf(JSON.parse((await describe(successor.address)).snapshotJson) as ControllerSnapshot);
  assert.equal(held.concurrency?.expiredLeases, 0, "A renewed its lease with the successor");
  assert.equal(held.inUse, LIMIT);

  // A is SIGKILLed while it still holds every unit: the successor gives them back within
  // lease_timeout (+ the 250 ms sweep and 1.5 s for a loaded machine), and B's tasks run.
  a.kill("SIGKILL");
  const aKilledAt = Date.now();
  await a.exited;
  await b.waitFor(/"done":10/, LEASE_MS + 20_000);
  const backMs = Date.now() - aKilledAt;
  const end = tasksOf(JSON.parse((await describe(successor.address)).snapshotJson) as ControllerSnapshot);
  const stats = cluster.stats();
  t.diagnostic(
    `failover ${failoverMs} ms; A's units back and 10 of B's tasks done ${backMs} ms after A's SIGKILL (lease_timeout ${LEASE_MS} ms); ` +
      `${stats.completed} tasks done, at most ${stats.maxRunning} running at once (limit ${LIMIT})`,
  );
  assert.equal(end.concurrency?.expiredLeases, 1);
  assert.equal(end.concurrency?.expiredUnits, LIMIT);
  assert.ok(backMs <= LEASE_MS + 1_750 + 2_000, `B's 10 tasks were done ${backMs} ms after A's SIGKILL (lease ${LEASE_MS} ms, its tasks 0.2 s)`);
  assert.ok(stats.maxRunning <= LIMIT, `the cluster ran ${stats.maxRunning} tasks at once, limit ${LIMIT}`);
});

async function describe(address: string) {
  const client = createGrpcQuotaClient(address);
  try {
    return await client.describeThrottlers({ deadlineAt: Date.now() + 5_000 });
  } finally {
    client.close();
  }
}
