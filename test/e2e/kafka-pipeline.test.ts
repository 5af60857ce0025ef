// services: processes, kafka
// priority: its processing rate (2,000 rows/s within 3 %) and class ratios need the CPU when its workers ask for it
// Whole pipelines on a real Kafka broker: `sluice controller`, `sluice worker` and `sluice run` as
// child processes, topics checked with kafkajs. Rates use generous, stated tolerances; every process
// is started here and ended by its own pid.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { type Child, ROOT, sluice, startController, writeSpec } from "../support/processes.ts";
import { brokers, consumeAll, createTopic, produce, uniqueName, type ConsumedMessage } from "../support/kafka.ts";

const RELAY = `${ROOT}/test/fixtures/relay-computation.ts`;
const LATE = `${ROOT}/test/fixtures/late-throttler-computation.ts`;

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

function track(child: Child): Child {
  children.push(child);
  return child;
}

interface Relayed {
  id: number;
  job: string;
  computation: string;
  partition: number;
  at: number;
  bytes: number;
}

const relayed = (messages: ConsumedMessage[]) => messages.map((m) => m.value as unknown as Relayed);

/**
 * Rate while every partition is backlogged: from `settleMs` after the first event (the bucket starts
 * full, so its `limit × period` burst lands first, later on a loaded machine) to the moment the first
 * partition runs out of data (after it, demand falls below the limit and no throttler can keep the
 * rate). Inside that window the bucket is empty at both ends, so the count is the limit's alone.
 */
function backloggedRate(events: { at: number; partition: number }[], settleMs: number): { rate: number; from: number; to: number } {
  const first = Math.min(...events.map((e) => e.at));
  const lastOf = new Map<number, number>();
  for (const e of events) lastOf.set(e.partition, Math.max(lastOf.get(e.partition) ?? 0, e.at));
  const from = first + settleMs;
  const to = Math.min(...lastOf.values());
  const inside = events.filter((e) => e.at >= from && e.at < to).length;
  return { rate: (inside * 1000) / (to - from), from: from - first, to: to - first };
}

/** Rate (per second) of the events at times `at` after the first second, as the issue measures it. */
function steadyRate(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  const from = (sorted[0] ?? 0) + 1000;
  const after = sorted.filter((t) => t >= from);
  const span = (after.at(-1) ?? from) - from;
  return (after.length * 1000) / span;
}

async function kafkaSpec(
  name: string,
  fields: { streams: Record<string, unknown>; computations: Record<string, unknown>; dynamic_spec: unknown; controller?: string },
) {
  return writeSpec({
    pipeline: name,
    kafka: { brokers: await brokers(), session_timeout: "6s" },
    ...(fields.controller ? { controller: { address: fields.controller } } : {}),
    streams: fields.streams,
    computations: fields.computations,
    dynamic_spec: fields.dynamic_spec,
  });
}

function checkNothingLost(messages: Relayed[], count: number, context = ""): { duplicates: number } {
  const ids = new Set(messages.map((m) => m.id));
  const missing = Array.from({ length: count }, (_, i) => i).filter((i) => !ids.has(i));
  assert.equal(
    missing.length,
    0,
    `${missing.length} of ${count} messages missing (first: ${missing.slice(0, 5).join(", ")}); ${messages.length} received ${context}`,
  );
  return { duplicates: messages.length - ids.size };
}

describe("pipelines on a real Kafka broker", { timeout: 300_000 }, () => {
  it("2 workers, 1 controller, 6 partitions, 30,000 messages at 2,000 rows/s: all delivered once, at the rate (−3 %, + one bucket)", async (t) => {
    const name = uniqueName("rate");
    const input = `${name}-in`;
    const output = `${name}-out`;
    await createTopic(input, 6);
    await createTopic(output, 6);
    const spec = await kafkaSpec(name, {
      streams: { input: { topic: input, partitions: 6 }, out: { topic: output, partitions: 6 } },
      computations: { Relay: { module: RELAY, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 100 } },
      dynamic_spec: {
        throttlers: { rows: { limit: 2000, period: "1s", request_period: "200ms" } },
        computations: { Relay: { input_rows_throttler_id: "rows" } },
      },
    });
    const controller = await startController(spec);
    track(controller.child);
    const workers = ["w1", "w2"].map((id) => track(sluice(["worker", spec, "--quiet", "--worker-id", id, "--controller", controller.address])));
    // Both workers in the group before the data arrives: nothing fails and nothing moves during the
    // run, so every message must be processed exactly once. (A rebalance mid-run redoes the
    // uncommitted batches of moved partitions: the rebalance test below counts those.)
    await Promise.all(workers.map((w) => w.waitFor(/started Relay/, 120_000, "stderr")));
    await new Promise((r) => setTimeout(r, 1000));
    await produce(input, 30_000);
    const out = relayed(await consumeAll(output, 30_000, 90_000));
    const counts = new Map<number, number>();
    for (const m of out) counts.set(m.partition, (counts.get(m.partition) ?? 0) + 1);
    const perPartition = JSON.stringify(Object.fromEntries(counts));
    const { duplicates } = checkNothingLost(out, 30_000, `per input partition ${perPartition}\n${workers.map((w) => w.stderr.slice(-2000)).join("\n---\n")}`);
    assert.equal(duplicates, 0, `${duplicates} duplicates although nothing failed`);
    const owners = new Set(out.map((m) => m.job.split("/")[0]));
    assert.deepEqual([...owners].sort(), ["w1", "w2"], "both workers had partitions");
    const times = out.map((m) => m.at);
    const first = Math.min(...times);
    const perHalfSecond: number[] = [];
    for (const at of times) perHalfSecond[Math.floor((at - first) / 500)] = (perHalfSecond[Math.floor((at - first) / 500)] ?? 0) + 1;
    const steady = backloggedRate(out, 3000);
    t.diagnostic(`processed per 500 ms: ${Array.from(perHalfSecond, (n) => n ?? 0).join(" ")}`);
    t.diagnostic(
      `rate while every partition had data (${steady.from}–${steady.to} ms): ${steady.rate.toFixed(1)}/s; after the first second to the last message: ${steadyRate(times).toFixed(1)}/s; duplicates ${duplicates}`,
    );
    // Below: the rate, less 3 %. Above: the token bucket's own bound over the window, the rate plus
    // one bucket (capacity 2,000 = limit × period), plus 3 %. Rows are timed when processed, so a
    // worker that a loaded machine stalls lets the bucket refill and then catches up inside the
    // window (a clean-clone CI run: 600 and 353 rows in the first half-seconds, then 1,755 and 1,678;
    // 2,145/s over 11.3 s, within the bucket's 2,177/s).
    const windowSeconds = (steady.to - steady.from) / 1000;
    const most = (2000 + 2000 / windowSeconds) * 1.03;
    assert.ok(
      steady.rate >= 2000 * 0.97 && steady.rate <= most,
      `processing rate while every partition had data ${steady.rate.toFixed(0)}/s, expected from 1,940/s to ${most.toFixed(0)}/s (rate + one bucket over ${windowSeconds.toFixed(1)} s, ±3 %)`,
    );
  });

  it("throttles by bytes alone, then by rows and bytes together; one throttler for both is refused", async (t) => {
    const name = uniqueName("bytes");
    const input = `${name}-in`;
    const output = `${name}-out`;
    await createTopic(input, 2);
    await createTopic(output, 2);
    await produce(input, 6000);
    const run = async (dynamicSpec: unknown, count: number) => {
      const spec = await kafkaSpec(name, {
        streams: { input: { topic: input, partitions: 2 }, out: { topic: output, partitions: 2 } },
        computations: { Relay: { module: RELAY, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 50 } },
        dynamic_spec: dynamicSpec,
      });
      const child = track(sluice(["run", spec, "--quiet"]));
      const messages = relayed(await consumeAll(output, count, 60_000));
      child.kill("SIGTERM");
      assert.equal((await child.exited).code, 0, child.stderr);
      return messages;
    };
    // bytes alone: 16,000 B/s; the messages are ~16 bytes each, so about 6 s for all of them
    const first = await run(
      { throttlers: { bytes: { limit: 16_000, period: "1s", request_period: "200ms" } }, computations: { Relay: { input_bytes_throttler_id: "bytes" } } },
      6000,
    );
    const bytes = backloggedRate(
      first.flatMap((m) => Array.from({ length: m.bytes }, () => m)),
      1000,
    );
    // Above: the bucket's own bound over the window, the limit plus one bucket (16,000 B), as in the
    // rows test: a worker stalled in its first second lets its start burst land inside the window.
    const bytesWindow = (bytes.to - bytes.from) / 1000;
    const mostBytes = (16_000 + 16_000 / bytesWindow) * 1.1;
    t.diagnostic(`bytes rate ${bytes.rate.toFixed(0)} B/s over ${bytesWindow.toFixed(1)} s (limit 16,000)`);
    assert.ok(
      bytes.rate >= 16_000 * 0.9 && bytes.rate <= mostBytes,
      `bytes rate ${bytes.rate.toFixed(0)} B/s, expected from 14,400 to ${mostBytes.toFixed(0)} B/s (limit + one bucket over ${bytesWindow.toFixed(1)} s, ±10 %)`,
    );

    const refused = track(
      sluice([
        "validate",
        await kafkaSpec(name, {
          streams: { input: { topic: input } },
          computations: { Relay: { module: RELAY, inputs: ["input"] } },
          dynamic_spec: { throttlers: { both: { limit: 1 } }, computations: { Relay: { input_rows_throttler_id: "both", input_bytes_throttler_id: "both" } } },
        }),
      ]),
    );
    assert.equal((await refused.exited).code, 1);
    assert.match(refused.stderr, /referenced by both input_rows_throttler_id and input_bytes_throttler_id/);
  });

  it("rows and bytes together: each iteration waits for both, the tighter one sets the pace", async () => {
    const name = uniqueName("both");
    const input = `${name}-in`;
    const output = `${name}-out`;
    await createTopic(input, 2);
    await createTopic(output, 2);
    await produce(input, 3000);
    const spec = await kafkaSpec(name, {
      streams: { input: { topic: input, partitions: 2 }, out: { topic: output, partitions: 2 } },
      computations: { Relay: { module: RELAY, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 50 } },
      dynamic_spec: {
        throttlers: {
          rows: { limit: 500, period: "1s", request_period: "200ms" },
          bytes: { limit: 1_000_000, period: "1s", request_period: "200ms" },
        },
        computations: { Relay: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } },
      },
    });
    const child = track(sluice(["run", spec, "--quiet", "--controller-port", "0"]));
    const address = (await child.waitFor(/embedded controller listening on (127\.0\.0\.1:\d+)/))[1] ?? "";
    const out = relayed(await consumeAll(output, 3000, 60_000));
    const rows = backloggedRate(out, 1000);
    const rowsWindow = (rows.to - rows.from) / 1000;
    const mostRows = (500 + 500 / rowsWindow) * 1.1;
    assert.ok(
      rows.rate >= 450 && rows.rate <= mostRows,
      `rows rate ${rows.rate.toFixed(0)}/s, expected from 450/s to ${mostRows.toFixed(0)}/s (limit + one bucket over ${rowsWindow.toFixed(1)} s, ±10 %; rows bind, bytes do not)`,
    );
    const quota = createGrpcQuotaClient(address);
    const snapshot = JSON.parse((await quota.describeThrottlers()).snapshotJson) as { throttlers: { id: string; counters: { granted: number } }[] };
    quota.close();
    const granted = (id: string) => snapshot.throttlers.find((t) => t.id === id)?.counters.granted ?? 0;
    const totalBytes = out.reduce((sum, m) => sum + m.bytes, 0);
    assert.ok(granted("rows") >= 3000, `rows granted ${granted("rows")}`);
    assert.ok(granted("bytes") >= totalBytes, `bytes granted ${granted("bytes")} < Σ byteSize ${totalBytes}: iterations did not wait for bytes`);
    child.kill("SIGTERM");
    assert.equal((await child.exited).code, 0, child.stderr);
  });

  it("a third worker joins, then one is killed: partitions move, processing continues, nothing is lost", async (t) => {
    const name = uniqueName("rebalance");
    const input = `${name}-in`;
    const output = `${name}-out`;
    await createTopic(input, 6);
    await createTopic(output, 6);
    await produce(input, 15_000);
    const controllerSpec = await kafkaSpec(name, {
      streams: { input: { topic: input, partitions: 6 }, out: { topic: output, partitions: 6 } },
      computations: { Relay: { module: RELAY, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 100 } },
      dynamic_spec: {
        throttlers: { rows: { limit: 1000, period: "1s", request_period: "200ms" } },
        computations: { Relay: { input_rows_throttler_id: "rows" } },
      },
    });
    const controller = await startController(controllerSpec);
    track(controller.child);
    const worker = (id: string) =>
      track(sluice(["worker", controllerSpec, "--quiet", "--worker-id", id, "--controller", controller.address, "--metrics-port", "0", "--metrics-open"]));
    // Each step waits for the workers to have processed rows (their own /metrics), not for a fixed
    // time: on a loaded machine two workers took over 9 s to start, and one killed before it had
    // processed anything cannot show that partitions moved.
    const metricAbove0 = async (child: Child, metric: string, what: string) => {
      const url = (await child.waitFor(/metrics on (http:\/\/\S+\/metrics)/))[1] ?? "";
      const pattern = new RegExp(`^${metric}\\{[^}]*\\} (\\d+)`, "m");
      const end = Date.now() + 120_000;
      for (;;) {
        const text = await fetch(url).then(
          (r) => r.text(),
          () => "",
        );
        if (Number(pattern.exec(text)?.[1] ?? 0) > 0) return;
        assert.ok(Date.now() < end, `${what} within 120 s`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const w1 = worker("w1");
    const w2 = worker("w2");
    const reading = consumeAll(output, 15_000, 120_000);
    await Promise.all([
      metricAbove0(w1, "sluice_worker_computation_rows_total", "w1 processed a row"),
      metricAbove0(w2, "sluice_worker_computation_rows_total", "w2 processed a row"),
    ]);
    // Killed as soon as the joining worker has jobs of its own, so the kill lands mid-stream.
    await metricAbove0(worker("w3"), "sluice_worker_computation_active_jobs", "the joining w3 had a job");
    w1.kill("SIGKILL");
    const killedAt = Date.now();
    const out = relayed(await reading);
    const times = out.map((m) => m.at).sort((a, b) => a - b);
    t.diagnostic(
      `first output ${((times[0] ?? 0) - killedAt) / 1000} s from the kill, last ${((times.at(-1) ?? 0) - killedAt) / 1000} s; all read ${(Date.now() - killedAt) / 1000} s after it`,
    );
    const gaps = times
      .slice(1)
      .map((x, i) => [x - (times[i] ?? 0), (times[i] ?? 0) - killedAt])
      .filter(([gap]) => (gap ?? 0) > 2000);
    t.diagnostic(`gaps over 2 s (length, at): ${JSON.stringify(gaps)}`);
    const w3 = children.at(-1);
    const { duplicates } = checkNothingLost(out, 15_000, `\nw2 stderr:\n${w2.stderr.slice(-3000)}\nw3 stderr:\n${w3?.stderr.slice(-3000)}`);
    const workers = new Set(out.map((m) => m.job.split("/")[0]));
    assert.deepEqual([...workers].sort(), ["w1", "w2", "w3"], "the joining worker took partitions");
    // What w1 processed but had not committed when killed is processed again: at-least-once.
    t.diagnostic(`${duplicates} duplicates from the partitions that moved`);
    assert.ok(duplicates <= 2000, `${duplicates} duplicates`);
  });

  it("classes vip (5) and bulk (1) on one throttler: 5:1 while both are backlogged, bulk takes all when vip is idle", async (t) => {
    const name = uniqueName("classes");
    const vipIn = `${name}-vip`;
    const bulkIn = `${name}-bulk`;
    const output = `${name}-out`;
    await createTopic(vipIn, 1);
    await createTopic(bulkIn, 1);
    await createTopic(output, 1);
    await produce(vipIn, 3000);
    await produce(bulkIn, 3000);
    const spec = await kafkaSpec(name, {
      streams: { vip: { topic: vipIn }, bulk: { topic: bulkIn }, out: { topic: output } },
      computations: {
        Vip: { module: RELAY, inputs: ["vip"], outputs: ["out"], max_rows_per_batch: 20 },
        Bulk: { module: RELAY, inputs: ["bulk"], outputs: ["out"], max_rows_per_batch: 20 },
      },
      dynamic_spec: {
        throttlers: {
          shared: { limit: 600, period: "1s", request_period: "200ms", max_grant_amount: 20, classes: { vip: { weight: 5 }, bulk: { weight: 1 } } },
        },
        computations: {
          Vip: { input_rows_throttler_id: "shared", input_rows_throttler_class_id: "vip" },
          Bulk: { input_rows_throttler_id: "shared", input_rows_throttler_class_id: "bulk" },
        },
      },
    });
    const child = track(sluice(["run", spec, "--quiet"]));
    const out = relayed(await consumeAll(output, 6000, 90_000));
    child.kill("SIGTERM");
    const vipTimes = out
      .filter((m) => m.computation === "Vip")
      .map((m) => m.at)
      .sort((a, b) => a - b);
    const bulkTimes = out
      .filter((m) => m.computation === "Bulk")
      .map((m) => m.at)
      .sort((a, b) => a - b);
    const start = Math.min(vipTimes[0] ?? 0, bulkTimes[0] ?? 0) + 1000;
    const vipDone = vipTimes.at(-1) ?? 0;
    const inWindow = (times: number[], from: number, to: number) => times.filter((t) => t >= from && t < to).length;
    const ratio = inWindow(vipTimes, start, vipDone) / Math.max(1, inWindow(bulkTimes, start, vipDone));
    t.diagnostic(`vip:bulk ${ratio.toFixed(2)} while both backlogged`);
    // About 5:1. Measured here between 3.96 and 5.29 over several runs: each job's class is briefly
    // idle at the controller between refills (it banks no credit then), which costs vip the most.
    assert.ok(ratio >= 3.5 && ratio <= 6.5, `vip:bulk while both backlogged ${ratio.toFixed(2)}, expected about 5`);
    const bulkAlone = steadyRate(bulkTimes.filter((t) => t >= vipDone + 500));
    t.diagnostic(`bulk alone ${bulkAlone.toFixed(0)}/s`);
    assert.ok(bulkAlone >= 540, `bulk alone ${bulkAlone.toFixed(0)}/s, expected the whole 600/s`);
  });

  it("serves the partition whose messages are older first when quota is scarce", async () => {
    const name = uniqueName("lag");
    const input = `${name}-in`;
    const output = `${name}-out`;
    await createTopic(input, 2);
    await createTopic(output, 1);
    const now = Date.now();
    // partition 0 holds messages an hour old, partition 1 fresh ones
    await produce(input, 1000, { partition: (i) => i % 2, timestampMs: (i) => (i % 2 === 0 ? now - 3_600_000 : now) });
    const spec = await kafkaSpec(name, {
      streams: { input: { topic: input, partitions: 2 }, out: { topic: output } },
      computations: { Relay: { module: RELAY, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 10 } },
      dynamic_spec: {
        throttlers: { scarce: { limit: 200, period: "100ms", request_period: "100ms" } },
        computations: { Relay: { input_rows_throttler_id: "scarce" } },
      },
    });
    const child = track(sluice(["run", spec, "--quiet"]));
    const out = relayed(await consumeAll(output, 1000, 60_000));
    child.kill("SIGTERM");
    const firstHalf = [...out].sort((a, b) => a.at - b.at).slice(0, 500);
    const fromOld = firstHalf.filter((m) => m.partition === 0).length;
    assert.ok(fromOld >= 400, `${fromOld} of the first 500 processed came from the older partition`);
  });

  it("tryGetThrottler is null for an undeclared id and a handle appears after `sluice reconfigure` adds it", async () => {
    const name = uniqueName("late");
    const input = `${name}-in`;
    const output = `${name}-out`;
    await createTopic(input, 1);
    await createTopic(output, 1);
    await produce(input, 100);
    const dynamic = { throttlers: { rows: { limit: 1000 } }, computations: {} };
    const spec = await kafkaSpec(name, {
      streams: { input: { topic: input }, out: { topic: output } },
      computations: { Late: { module: LATE, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 10 } },
      dynamic_spec: dynamic,
    });
    const child = track(sluice(["run", spec, "--quiet", "--controller-port", "0"]));
    const address = (await child.waitFor(/embedded controller listening on (127\.0\.0\.1:\d+)/))[1] ?? "";
    const before = await consumeAll(output, 100, 30_000);
    assert.ok(before.every((m) => m.value["handle"] === false));
    assert.match(String(before[0]?.value["threw"]), /THROTTLER_NOT_DECLARED: throttler "late" is not declared/);
    const added = writeSpec({ throttlers: { ...dynamic.throttlers, late: { limit: 1000 } }, computations: {} });
    const reconfigure = track(sluice(["reconfigure", added, "--controller", address]));
    assert.equal((await reconfigure.exited).code, 0, reconfigure.stderr + reconfigure.stdout);
    await new Promise((r) => setTimeout(r, 500));
    await produce(input, 100, { firstId: 100 });
    const all = await consumeAll(output, 200, 30_000);
    const later = all.filter((m) => Number(m.value["id"]) >= 100);
    assert.ok(later.length === 100 && later.every((m) => m.value["handle"] === true), "every later batch got a working handle");
    child.kill("SIGTERM");
    assert.equal((await child.exited).code, 0, child.stderr);
  });
});
