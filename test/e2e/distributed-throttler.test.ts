// services: processes
// alone: its rates, class shares and reconfiguration windows are measured over seconds across four processes, which the load of the lane starves even at raised priority
// The distributed throttler across real processes: a `sluice controller` child process and job-like
// quota clients in other child processes, over gRPC on 127.0.0.1. Timing claims use generous,
// stated tolerances; every process is started here and ended by its own pid.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { type Child, NOOP_COMPUTATION, sluice, startController, tsNode, writeSpec } from "../support/processes.ts";

interface ClientResult {
  consumed: number;
  grants: number[];
  error: { code: string; message: string } | null;
}

interface ThrottlerView {
  id: string;
  limit: number | null;
  balance: number | null;
  counters: { granted: number };
  classes: { id: string; granted: number; waitTime: { count: number; maxMs: number } }[];
}

const children: Child[] = [];
const clients: QuotaServiceClient[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
  for (const client of clients) client.close();
});

function spec(throttlers: Record<string, unknown>, computations: Record<string, Record<string, string>> = {}) {
  return writeSpec({
    pipeline: "dt",
    streams: { input: { topic: "input" } },
    computations: Object.fromEntries(["Reader", ...Object.keys(computations)].map((name) => [name, { module: NOOP_COMPUTATION, inputs: ["input"] }])),
    dynamic_spec: { throttlers, computations },
  });
}

async function controller(specPath: string, port = 0) {
  const started = await startController(specPath, port);
  children.push(started.child);
  const client = createGrpcQuotaClient(started.address);
  clients.push(client);
  const describe = async (): Promise<Map<string, ThrottlerView>> => {
    const { snapshotJson } = await client.describeThrottlers();
    const snapshot = JSON.parse(snapshotJson) as { throttlers: ThrottlerView[]; version: number };
    return new Map(snapshot.throttlers.map((t) => [t.id, t]));
  };
  /** One throttler as the controller reads it, at the controller's own time (its generatedAt). */
  const reading = async (id: string): Promise<Reading> => {
    const { snapshotJson } = await client.describeThrottlers();
    const snapshot = JSON.parse(snapshotJson) as { throttlers: ThrottlerView[]; generatedAt: string };
    const view = snapshot.throttlers.find((t) => t.id === id);
    assert.ok(view, `throttler ${id} in ${snapshotJson}`);
    return { atMs: Date.parse(snapshot.generatedAt), granted: view.counters.granted, balance: view.balance ?? 0 };
  };
  return { ...started, client, describe, reading };
}

interface Reading {
  atMs: number;
  granted: number;
  balance: number;
}

/**
 * How far what the controller granted between two readings is from what a bucket at `limit`
 * refills in that time, corrected by what the balance went down by: a client that fell behind for
 * a moment (its process starved on a loaded machine) leaves quota in the bucket, and a bucket
 * spends what it saved when the client catches up. Times are the controller's, so a late
 * DescribeThrottlers answer (this process or the controller busy) does not stretch the window.
 */
function againstLimit(first: Reading, last: Reading, limit: number) {
  const seconds = (last.atMs - first.atMs) / 1000;
  const granted = last.granted - first.granted;
  const refilled = limit * seconds + first.balance - last.balance;
  const figures = `granted ${granted} in ${seconds.toFixed(2)} s (${(granted / seconds).toFixed(1)}/s), balance ${first.balance.toFixed(1)} → ${last.balance.toFixed(1)}: a bucket at ${limit}/s refilled ${refilled.toFixed(1)}`;
  return { relativeError: Math.abs(granted - refilled) / (limit * seconds), figures };
}

/** Starts a quota client process; resolves once it is connected and has its dynamic_spec. */
async function quotaClient(config: Record<string, unknown>): Promise<{ child: Child; result: Promise<ClientResult> }> {
  const child = tsNode("test/fixtures/quota-client.ts", [JSON.stringify(config)]);
  children.push(child);
  await child.waitFor(/"ready":true/);
  const result = child.exited.then(() => {
    const line = child.stdout.trim().split("\n").at(-1) ?? "{}";
    return JSON.parse(line) as ClientResult;
  });
  return { child, result };
}

/**
 * Starts clients spawned without a `startAt` together, once all are ready: resolves with the start
 * time sent to them (500 ms ahead, so every one of them has it before then).
 */
function startTogether(runs: readonly { child: Child }[]): number {
  const startAt = Date.now() + 500;
  for (const run of runs) run.child.send(String(startAt));
  return startAt;
}

/** Polls `condition` every 50 ms for up to 60 s. */
async function eventually(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`no ${what} within 60 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const sleepUntil = (at: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));

describe("distributed throttler across processes", () => {
  it("three client processes share 200/s: the steady rate within ±2 % of the limit, nobody starved", async () => {
    const c = await controller(spec({ shared: { limit: 200, period: "1s", request_period: "200ms" } }));
    // The window is 5 s (1000 units; ± 2 % is 20). Against the balance (againstLimit) what the
    // controller granted equals what the bucket refilled unless the bucket sat full: the only error
    // is refill lost while it sat full (clients starved for more than its one second of capacity), a
    // number of units that does not grow with the window. The tolerance, 2 % of the window's units,
    // is therefore stricter the shorter the window: 20 units of slack here, 32 over 8 s.
    const windowEndMs = 7_000;
    const durationMs = windowEndMs + 500;
    const runs = await Promise.all(
      [0, 1, 2].map((i) => quotaClient({ controller: c.address, computation: "Reader", throttler: "shared", clientId: `p${i}`, durationMs, amount: 1 })),
    );
    const startAt = startTogether(runs);
    // Judged between two readings once the initial bucket is spent and every client has ramped up
    // (its first RequestQuota, slow on a loaded machine, is behind it), against the bucket's
    // balance and the controller's clock (againstLimit).
    await sleepUntil(startAt + 2_000);
    const first = await c.reading("shared");
    await sleepUntil(startAt + windowEndMs);
    const last = await c.reading("shared");
    const results = await Promise.all(runs.map((r) => r.result));
    const steady = againstLimit(first, last, 200);
    console.log(`# steady: ${steady.figures}; error ${(steady.relativeError * 100).toFixed(2)} %`);
    assert.ok(steady.relativeError <= 0.02, `${steady.figures}: expected the limit ± 2 %`);
    const total = (200 * durationMs) / 1000 + 200;
    for (const [i, r] of results.entries()) {
      assert.equal(r.error, null);
      assert.ok(r.consumed >= (total / 3) * 0.5, `client ${i} consumed ${r.consumed}: starved`);
    }
  });

  it("5:3:1 backlogged classes in three processes get 5/9, 3/9, 1/9 ± 5 %; a waking class is served within two chunk times", async () => {
    const chunk = 10;
    const limit = 300; // one chunk every 33 ms
    const c = await controller(
      spec(
        {
          weighted: {
            limit,
            period: "1s",
            request_period: "200ms",
            max_grant_amount: chunk,
            classes: { a: { weight: 5 }, b: { weight: 3 }, c: { weight: 1 }, late: { weight: 1 } },
          },
        },
        {
          A: { input_rows_throttler_id: "weighted", input_rows_throttler_class_id: "a" },
          B: { input_rows_throttler_id: "weighted", input_rows_throttler_class_id: "b" },
          C: { input_rows_throttler_id: "weighted", input_rows_throttler_class_id: "c" },
          Late: { input_rows_throttler_id: "weighted", input_rows_throttler_class_id: "late" },
        },
      ),
    );
    const runs = await Promise.all(
      ["A", "B", "C"].map((computation) =>
        quotaClient({ controller: c.address, computation, throttler: "weighted", clientId: computation, durationMs: 9000, amount: 5 }),
      ),
    );
    const late = await quotaClient({ controller: c.address, computation: "Late", throttler: "weighted", clientId: "late", durationMs: 0, amount: 1, calls: 1 });
    const startAt = startTogether(runs);
    late.child.send(String(startAt + 6000));
    await sleepUntil(startAt + 2000);
    const before = (await c.describe()).get("weighted");
    await sleepUntil(startAt + 6000);
    const after = (await c.describe()).get("weighted");
    const delta = (id: string) => (after?.classes.find((k) => k.id === id)?.granted ?? 0) - (before?.classes.find((k) => k.id === id)?.granted ?? 0);
    const total = delta("a") + delta("b") + delta("c");
    console.log(`# classes: a ${delta("a")}, b ${delta("b")}, c ${delta("c")} units of ${total} from 2 s to 6 s`);
    for (const [id, weight] of [
      ["a", 5],
      ["b", 3],
      ["c", 1],
    ] as const) {
      const share = delta(id) / total;
      assert.ok(
        Math.abs(share - weight / 9) <= 0.05 * (weight / 9) + 0.005,
        `class ${id}: share ${share.toFixed(4)}, expected ${(weight / 9).toFixed(4)} ± 5 %`,
      );
    }
    const wake = await late.result;
    assert.equal(wake.error, null, JSON.stringify(wake.error));
    const chunkMs = (chunk / limit) * 1000;
    // How long its request waited in the controller's queue, by the controller's own figure: the
    // client's view would add its process's start-up, timers and round trips, which a loaded
    // machine stretches. Two chunk times, plus 200 ms for the controller's own timers running late
    // on a busy 2-core machine.
    const lateWait = (await c.describe()).get("weighted")?.classes.find((k) => k.id === "late")?.waitTime;
    assert.equal(lateWait?.count, 1, `the late class's one request: ${JSON.stringify(lateWait)}`);
    assert.ok(
      (lateWait?.maxMs ?? Infinity) <= 2 * chunkMs + 200,
      `waking class waited ${lateWait?.maxMs} ms in the queue; two chunk times are ${2 * chunkMs} ms`,
    );
    await Promise.all(runs.map((r) => r.result));
  });

  it("serves the client with the older lag timestamp first when quota is scarce", async (t) => {
    const c = await controller(spec({ scarce: { limit: 20, period: "1s", request_period: "500ms" } }));
    const [old, fresh] = await Promise.all([
      quotaClient({ controller: c.address, computation: "Reader", throttler: "scarce", clientId: "old", durationMs: 5000, amount: 1, timestampMs: 1_000 }),
      quotaClient({ controller: c.address, computation: "Reader", throttler: "scarce", clientId: "fresh", durationMs: 5000, amount: 1, timestampMs: 2_000 }),
    ]);
    startTogether([old, fresh]);
    const [o, f] = await Promise.all([old.result, fresh.result]);
    // Both share the initial bucket (20 units, granted to whoever asks first while the balance is
    // positive); after that, at 20/s, the older one's request is always ahead in the queue.
    const after = (grants: number[]) => grants.filter((t) => t >= 1500).length;
    const older = after(o.grants);
    const newer = after(f.grants);
    t.diagnostic(`after the first 1.5 s: older ${older} units, newer ${newer}; in all: older ${o.consumed}, newer ${f.consumed}`);
    assert.ok(older >= 9 * newer, `after the initial bucket the older client got ${older}, the newer ${newer}`);
    assert.ok(older >= 50, `older client got ${older} units at 20/s over 3.5 s`);
  });

  it("applies `sluice reconfigure` while clients run: a raised limit within one request_period; an invalid update changes nothing", async () => {
    const specPath = spec({ live: { limit: 20, period: "1s", request_period: "500ms" } });
    const c = await controller(specPath);
    const startAt = Date.now() + 2000;
    // The client runs until it is told to stop, after the checks: `sluice reconfigure` is a process of
    // its own, which a loaded machine may take tens of seconds to start, and the window below must
    // fall inside the run.
    const durationMs = 240_000;
    const run = await quotaClient({ controller: c.address, computation: "Reader", throttler: "live", clientId: "r", startAt, durationMs, amount: 1 });
    await sleepUntil(startAt + 2000);
    const raised = writeSpec({ throttlers: { live: { limit: 200, period: "1s", request_period: "500ms" } } });
    const reconfigure = sluice(["reconfigure", raised, "--controller", c.address]);
    children.push(reconfigure);
    assert.equal((await reconfigure.exited).code, 0, reconfigure.stderr);
    assert.match(reconfigure.stdout, /dynamic_spec version 2 applied/);
    const changedAt = Date.now();
    await sleepUntil(changedAt + 500); // one request_period
    const r1 = await c.reading("live");
    await sleepUntil(changedAt + 2500);
    const r2 = await c.reading("live");
    assert.ok(r2.atMs < startAt + durationMs, `the change came ${changedAt - startAt} ms into the client's ${durationMs} ms run: too late to measure it`);
    // At the raised limit, by the controller's clock and balance (againstLimit): the bucket's
    // capacity grew with the limit, so what it saved while the client's prefetch caught up is
    // spent inside the window and a plain count would overshoot.
    const raisedRate = againstLimit(r1, r2, 200);
    assert.ok(raisedRate.relativeError <= 0.1, `after the change ${raisedRate.figures}: expected 200/s ± 10 %`);

    const invalid = writeSpec({ throttlers: { live: { limit: -5 } } });
    const refused = sluice(["reconfigure", invalid, "--controller", c.address]);
    children.push(refused);
    assert.equal((await refused.exited).code, 1);
    assert.match(refused.stderr + refused.stdout, /throttlers\.live\.limit/);
    const view = (await c.describe()).get("live");
    assert.equal(view?.limit, 200, "the invalid update changed nothing");

    run.child.send("stop");
    const result = await run.result;
    assert.equal(result.error, null, "the handle taken before the change kept working");
  });
});

// The failure paths measure no rate or share (a block that lasts, an error code, an end within
// 30 s): they run side by side, after the measured tests above and not beside them.
describe("distributed throttler across processes: failure paths", { concurrency: true }, () => {
  it("blocks while the controller is killed, and resumes by itself when it restarts on the same port", async () => {
    const specPath = spec({ slow: { limit: 5, period: "1s", request_period: "200ms", retrying_channel: { min_backoff: "100ms", max_backoff: "500ms" } } });
    const first = await controller(specPath);
    const run = await quotaClient({
      controller: first.address,
      computation: "Reader",
      throttler: "slow",
      clientId: "r",
      startAt: Date.now(),
      durationMs: 60_000,
      amount: 1,
      calls: 20,
    });
    // The bucket (5) is gone and the client waits at 5/s: by the controller's counter, not a sleep
    // that a slow start of the client outlasts.
    await eventually(async () => (await first.reading("slow")).granted >= 6, "the client past the initial bucket");
    first.child.kill("SIGKILL");
    await first.child.exited;
    let finished = false;
    void run.result.then(() => (finished = true));
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(finished, false, "throttle() blocks while the controller is away");
    const second = await controller(specPath, first.port);
    const result = await run.result;
    assert.equal(result.error, null, JSON.stringify(result.error));
    assert.equal(result.consumed, 20);
    second.child.kill("SIGTERM");
  });

  it("fails with RETRIES_EXHAUSTED when the controller stays away past a small retry budget", async () => {
    const specPath = spec({
      slow: { limit: 1, period: "1s", request_period: "200ms", retrying_channel: { retry_attempts: 3, min_backoff: "100ms", max_backoff: "200ms" } },
    });
    const c = await controller(specPath);
    const run = await quotaClient({
      controller: c.address,
      computation: "Reader",
      throttler: "slow",
      clientId: "r",
      startAt: Date.now(),
      durationMs: 60_000,
      amount: 1,
      calls: 100,
    });
    await new Promise((r) => setTimeout(r, 1000));
    c.child.kill("SIGKILL");
    const result = await run.result;
    assert.equal(result.error?.code, "RETRIES_EXHAUSTED", JSON.stringify(result));
    assert.match(result.error?.message ?? "", /failed 3 times/);
  });

  it("ends a throttle() waiting on a throttler that `sluice reconfigure` removes with THROTTLER_REMOVED, within one request_period", async () => {
    const specPath = spec({ kept: { limit: 10 }, gone: { limit: 1, period: "1s", request_period: "1s" } });
    const c = await controller(specPath);
    const run = await quotaClient({
      controller: c.address,
      computation: "Reader",
      throttler: "gone",
      clientId: "r",
      startAt: Date.now(),
      durationMs: 60_000,
      amount: 1,
      calls: 100,
    });
    // The bucket is spent and the client waits at 1/s (the controller's counter, not a sleep).
    await eventually(async () => (await c.reading("gone")).granted >= 2, "the client past the initial bucket");
    const removing = writeSpec({ throttlers: { kept: { limit: 10 } } });
    const reconfigure = sluice(["reconfigure", removing, "--controller", c.address]);
    children.push(reconfigure);
    assert.equal((await reconfigure.exited).code, 0, reconfigure.stderr);
    const removedAt = Date.now();
    const result = await run.result;
    const tookMs = Date.now() - removedAt;
    assert.equal(result.error?.code, "THROTTLER_REMOVED", JSON.stringify(result));
    assert.match(result.error?.message ?? "", /throttler "gone" was removed/);
    // One request_period (1 s) plus the client process's exit, which a loaded machine can stretch to
    // seconds; what this tells apart is the 10 min retry budget it spent before the fix.
    assert.ok(tookMs < 30_000, `the waiting throttle() ended ${tookMs} ms after the update`);
  });
});
