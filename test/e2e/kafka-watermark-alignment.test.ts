// services: processes, kafka
// Watermark alignment (docs/design.md §12) end to end on the real broker: `sluice run` (embedded
// controller + worker, one process) reads two partitions whose event times are an hour apart. With
// alignment the partition ahead is held (paused, no quota asked) while the other catches up, then
// both read; without it both read at once. About 10–15 s for both runs (6.4 s + 3.7 s measured).
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { get, scrape } from "../support/prometheus.ts";
import { ROOT, sluice, writeSpec, type Child } from "../support/processes.ts";
import { brokers, consumeAll, createTopic, produce, uniqueName } from "../support/kafka.ts";

const RELAY = `${ROOT}/test/fixtures/slow-relay-computation.ts`;
const MIN = 60_000;
const HOUR = 60 * MIN;
/** Per partition; 10 s of event time apart, so each partition spans an hour. */
const PER_PARTITION = 360;
const STEP_MS = 10_000;
const DRIFT_MS = 20 * MIN;
const ROWS_PER_BATCH = 10;
/** One iteration of either partition (its read watermark is taken before it is processed), twice, with room to spare. */
const SLACK_MS = 5 * MIN;

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

interface Out {
  id: number;
  partition: number;
  eventMs: number;
  at: number;
}

async function runPipeline(
  aligned: boolean,
): Promise<{ outputs: Out[]; heldSeen: { worker: number; controller: number; groupWatermark: number; dashboard: number } }> {
  const name = uniqueName(aligned ? "align" : "noalign");
  const input = `${name}-in`;
  const output = `${name}-out`;
  await createTopic(input, 2);
  await createTopic(output, 1);
  const t0 = Date.now() - 3 * HOUR;
  // Partition 0 spans [t0, t0 + 1 h); partition 1 starts an hour later.
  await produce(input, PER_PARTITION, { partition: () => 0, timestampMs: (i) => t0 + i * STEP_MS });
  await produce(input, PER_PARTITION, { partition: () => 1, timestampMs: (i) => t0 + HOUR + i * STEP_MS, firstId: PER_PARTITION });
  const spec = writeSpec({
    pipeline: name,
    kafka: { brokers: await brokers(), session_timeout: "6s" },
    streams: { input: { topic: input, partitions: 2 }, out: { topic: output, partitions: 1 } },
    computations: {
      Relay: {
        module: RELAY,
        inputs: ["input"],
        outputs: ["out"],
        max_rows_per_batch: ROWS_PER_BATCH,
        ...(aligned ? { watermark_alignment: { group_name: "clicks", drift_bound: "20m", idle_timeout: "2s" } } : {}),
      },
    },
    dynamic_spec: { throttlers: {}, computations: {} },
  });
  const run = sluice(["run", spec, "--http-port", "0", "--quiet"]);
  children.push(run);
  const base = `http://127.0.0.1:${(await run.waitFor(/sluice run: dashboard on http:\/\/127\.0\.0\.1:(\d+)\//, 120_000))[1]}`;
  const heldSeen = { worker: 0, controller: 0, groupWatermark: 0, dashboard: 0 };
  let reading = true;
  const watching = (async () => {
    while (reading) {
      const metrics = await scrape(`${base}/metrics`).catch(() => null);
      if (metrics) {
        heldSeen.worker = Math.max(
          heldSeen.worker,
          metrics.find("sluice_worker_alignment_held_partitions", { computation_id: "Relay", alignment_group: "clicks" }) ?? 0,
        );
        heldSeen.controller = Math.max(heldSeen.controller, metrics.find("sluice_controller_alignment_held_partitions", { alignment_group: "clicks" }) ?? 0);
        heldSeen.groupWatermark = Math.max(
          heldSeen.groupWatermark,
          metrics.find("sluice_controller_alignment_group_watermark_ms", { alignment_group: "clicks" }) ?? 0,
        );
      }
      // What the dashboard's alignment table draws from.
      const snapshot = await get(`${base}/api/snapshot`).catch(() => null);
      const groups = snapshot ? ((JSON.parse(snapshot.body) as { alignment?: { group: string; held: number }[] }).alignment ?? []) : [];
      heldSeen.dashboard = Math.max(heldSeen.dashboard, groups.find((g) => g.group === "clicks")?.held ?? 0);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  if (aligned) assert.match((await get(`${base}/`)).body, /<h2>Watermark alignment<\/h2>/);
  const consumed = await consumeAll(output, 2 * PER_PARTITION, 45_000);
  reading = false;
  await watching;
  run.kill("SIGTERM");
  await run.exited;
  const outputs = consumed.map((m) => m.value as unknown as Out).sort((a, b) => a.at - b.at);
  assert.equal(new Set(outputs.map((o) => o.id)).size, 2 * PER_PARTITION, `every input processed (${outputs.length} outputs)`);
  return { outputs, heldSeen };
}

describe("watermark alignment on a real Kafka broker", { timeout: 300_000 }, () => {
  it("the partition an hour ahead is held while the other catches up, then both read", async (t) => {
    const { outputs, heldSeen } = await runPipeline(true);
    const behind = outputs.filter((o) => o.partition === 0);
    const ahead = outputs.filter((o) => o.partition === 1);
    const firstBehindAt = behind[0]?.at ?? 0;
    // Before the partition behind has processed anything, the one ahead may have read its first iteration only.
    const early = ahead.filter((o) => o.at < firstBehindAt).length;
    assert.ok(early <= ROWS_PER_BATCH, `${early} rows ahead read before the partition behind processed any`);
    // Afterwards, every row ahead (but its first iteration, read before anything was known) was read
    // within drift_bound (+ slack) of what the partition behind had processed by then — until the
    // partition behind ran out of data and went idle (idle_timeout 2 s), after which nothing holds it.
    const lastBehindAt = behind[behind.length - 1]?.at ?? 0;
    let behindMax = 0;
    let i = 0;
    let worst = -Infinity;
    for (const o of outputs) {
      while (i < behind.length && (behind[i]?.at ?? Infinity) <= o.at) behindMax = Math.max(behindMax, behind[i++]?.eventMs ?? 0);
      if (o.partition !== 1 || o.id < PER_PARTITION + ROWS_PER_BATCH || o.at > lastBehindAt + 1_500) continue;
      worst = Math.max(worst, o.eventMs - behindMax);
    }
    assert.ok(
      worst <= DRIFT_MS + SLACK_MS,
      `the partition ahead ran ${(worst / MIN).toFixed(1)} min ahead of the one behind (drift_bound 20 min, slack 5 min)`,
    );
    // "Then both read": the partition ahead read while the one behind was still reading its last stretch.
    const overlap = ahead.filter((o) => o.at < lastBehindAt).length;
    assert.ok(overlap > ROWS_PER_BATCH, `${overlap} rows ahead read before the partition behind finished`);
    const afterIdle = ahead.filter((o) => o.at > lastBehindAt).length;
    assert.ok(afterIdle > 0 && ahead.at(-1)?.eventMs !== undefined, "the partition ahead finished once the other was idle");
    t.diagnostic(
      `early ${early} rows, furthest ahead ${(worst / MIN).toFixed(1)} min, overlap ${overlap} rows, ${afterIdle} rows after the other finished; held seen worker ${heldSeen.worker} controller ${heldSeen.controller} dashboard ${heldSeen.dashboard}`,
    );
    assert.ok(
      heldSeen.worker >= 1 && heldSeen.controller >= 1,
      `held partitions seen in /metrics: worker ${heldSeen.worker}, controller ${heldSeen.controller}`,
    );
    assert.ok(heldSeen.groupWatermark > 0, "the group watermark was exported");
    assert.ok(heldSeen.dashboard >= 1, "the dashboard's snapshot showed the held partition");
  });

  it("without watermark_alignment both partitions read at once", async (t) => {
    const { outputs } = await runPipeline(false);
    const behind = outputs.filter((o) => o.partition === 0);
    const ahead = outputs.filter((o) => o.partition === 1);
    const midBehindAt = behind[Math.floor(behind.length / 2)]?.at ?? 0;
    const aheadEarly = ahead.filter((o) => o.at <= midBehindAt).length;
    t.diagnostic(`${aheadEarly} rows ahead read before the other was half done`);
    assert.ok(aheadEarly >= PER_PARTITION / 4, `${aheadEarly} of ${PER_PARTITION} rows of the partition ahead read before the other was half done`);
  });
});
