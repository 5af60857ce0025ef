// services: processes, prometheus
// alone: its control band is read through a simulated cluster on this process's timers and a real Prometheus, which the load of the lane disturbs even at raised priority
// Seed 004 end to end (issue 11): examples/cluster-admission run by `sluice run` admits tasks to a
// simulated cluster through a concurrency throttler whose limit (in cores: a task takes one unit per
// core it asks) follows the cluster's CPU, read from a real Prometheus (Debian's prometheus, started
// here as a server of this test's own so that it can be stopped mid-run without disturbing other
// tests). Measured, with stated tolerances:
//   1. slow start from initial_limit 4 reaches the band [0.90, 0.95] within 60 s (expected ~20 s);
//   2. afterwards, over STEADY_INTERVALS intervals: the share of the loop's readings inside the band is ≥ 80 %
//      (the issue's goal), counting the band widened by ±0.02 of reading noise, with an allowance
//      of one reading, and every reading within ±0.05 — on a loaded 2-core machine one late
//      scrape or a stalled event loop spoils one reading now and then, which the law then corrects;
//      the virtual-time test (test/simulation/adaptive-law-cluster-sim.test.ts) proves the law itself at
//      ≥ 80 % in every run without allowance; and no overload (tasks asking more cores than the
//      cluster has) lasting more than one interval;
//   3. the cluster loses half its capacity → a reading strictly inside the band within 5 intervals
//      of the loss, counted to the decision that read it, with an allowance of one reading (a late
//      scrape on a loaded machine pushes the loss or the cut into the next reading);
//   4. dry_run: the limit in force stays while the suggested limit moves;
//   5. Prometheus stopped → the limit holds, then falls to min_limit (3), tasks keep completing;
//      Prometheus back → the loop raises the limit again.
// The interval stays the example's 2 s: the law is tuned to a reading whose window (4 s, plus a
// second of scrape lag) spans about 2.5 intervals, and the virtual-time model reads inside the band
// far less often at 1 s or 1.5 s; so the time is saved on waits, not on the loop.
//
//   pnpm test test/e2e/adaptive-cluster-admission.test.ts
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { SimulatedCluster } from "../../examples/cluster-admission/simulated-cluster.ts";
import { examplePipeline, freePort, SnapshotSampler, waitUntil } from "../support/adaptive-run.ts";
import { sluice, type Child } from "../support/processes.ts";
import { prometheusScript, waitForNumber, type OwnPrometheus, type ScrapeTarget } from "../support/prometheus-server.ts";

const INTERVAL_MS = 2_000;
/**
 * Intervals the steady phase watches: 10 readings, of which the stated allowance (one reading
 * beyond the goal's 20 %) lets 3 fall outside. A reading's window spans about 2.5 intervals, so one
 * stalled scrape or event loop spoils up to 3 readings in a row: fewer readings would leave no
 * room for even one stall.
 */
const STEADY_INTERVALS = 10;
const LOW = 0.9;
const HIGH = 0.95;
const CORES = 64;
const THROTTLER = "cluster_tasks";

let prometheus: OwnPrometheus | undefined;
let prometheusPort = 0;
const prometheusHome = mkdtempSync(join(tmpdir(), "sluice-prometheus-"));
let target: ScrapeTarget | undefined;
let cluster: SimulatedCluster | undefined;
let run: Child | undefined;
let client: QuotaServiceClient | undefined;
let sampler: SnapshotSampler | undefined;
let specText = "";
const clusterName = `e2e-${randomUUID()}`;
/** Ground truth from the cluster every 250 ms: demand over capacity (> 1 = overload). */
const demand: { at: number; demand: number }[] = [];
let demandTimer: NodeJS.Timeout | undefined;

/** Inside [low, high]; with slack, within `slack` of it — never a saturated reading (≥ 1.0 is an overload). */
/** How far one Prometheus reading of the simulated cluster moves with timer lateness alone. */
const READING_NOISE = 0.02;
const inBand = (load: number | null, slack = 0) => load !== null && load >= LOW - slack && (slack === 0 ? load <= HIGH : load < Math.min(1, HIGH + slack));
const fmt = (n: number | null) => (n === null ? "-" : n.toFixed(3));

before(async () => {
  const setupAt = Date.now();
  const script = await prometheusScript();
  prometheusPort = await freePort();
  prometheus = await script.startPrometheus({ home: prometheusHome, port: prometheusPort });
  cluster = new SimulatedCluster({ cores: CORES, name: clusterName });
  const clusterUrl = await cluster.start(0);
  target = script.registerScrapeTarget(new URL(clusterUrl).host, {}, { home: prometheusHome });
  await waitForNumber(prometheus.url, `cluster_cpu_utilisation{cluster="${clusterName}"}`);
  const scrapedAt = Date.now();
  demandTimer = setInterval(() => demand.push({ at: Date.now(), demand: cluster?.stats().demand ?? 0 }), 250);
  const { path, spec } = examplePipeline({ prometheusUrl: prometheus.url, clusterName });
  specText = JSON.stringify(spec.dynamic_spec);
  run = sluice(["run", path, "--controller-port", "0", "--quiet"], { CLUSTER_URL: clusterUrl });
  const address = (await run.waitFor(/embedded controller listening on (127\.0\.0\.1:\d+)/, 120_000))[1] ?? "";
  client = createGrpcQuotaClient(address);
  sampler = new SnapshotSampler(client, THROTTLER);
  sampler.start(250);
  console.log(
    `# set-up: ${((Date.now() - setupAt) / 1000).toFixed(1)} s (Prometheus scraping the cluster after ${((scrapedAt - setupAt) / 1000).toFixed(1)} s)`,
  );
});

after(async () => {
  sampler?.stop();
  if (demandTimer) clearInterval(demandTimer);
  client?.close();
  run?.kill("SIGTERM");
  await run?.exited;
  target?.remove();
  await cluster?.stop();
  if (prometheus) await (await prometheusScript()).stopPrometheus(prometheus.pid);
});

/** Replaces the throttler's adaptive block, live. */
async function reconfigure(adaptive: Record<string, unknown>): Promise<void> {
  assert.ok(client);
  const dynamic = JSON.parse(specText) as { throttlers: Record<string, { adaptive: Record<string, unknown> }> };
  const throttler = dynamic.throttlers[THROTTLER];
  assert.ok(throttler);
  Object.assign(throttler.adaptive, adaptive);
  specText = JSON.stringify(dynamic);
  await client.updateDynamicSpec(specText, { deadlineAt: Date.now() + 5_000 });
}

function longestOverloadMs(from: number, to = Date.now()): number {
  let longest = 0;
  let startedAt: number | null = null;
  for (const { at, demand: d } of demand) {
    if (at < from || at > to) continue;
    if (d > 1) startedAt ??= at;
    else startedAt = null;
    if (startedAt !== null) longest = Math.max(longest, at - startedAt);
  }
  return longest;
}

describe("adaptive concurrency limit on a simulated cluster, load from a real Prometheus", () => {
  let bandReachedAt = 0;

  it("slow-starts from initial_limit to the band", async () => {
    assert.ok(sampler && run);
    const startedAt = Date.now();
    const first = await waitUntil("first adaptive decision", 30_000, () => sampler?.decisions()[0]);
    assert.ok((first.limit ?? 0) <= 6, `slow start: the first limit is ${first.limit}, not a jump`);
    const reached = await waitUntil("a reading inside the band", 60_000, () => sampler?.decisions().find((d) => inBand(d.load)));
    bandReachedAt = reached.at;
    const seconds = (reached.at - startedAt) / 1000;
    const limits = sampler.decisions().map((d) => d.limit);
    console.log(`# slow start: band reached after ${seconds.toFixed(1)} s at limit ${reached.limit}; limits ${limits.join(" ")}`);
    assert.match(
      run.stdout,
      /adaptive cluster_tasks: raise limit 4 -> \d+: load [\d.]+ below \[0\.9, 0\.95\], use \d+/,
      "each change is logged with its reading",
    );
  });

  it("holds the load in the band afterwards (≥ 80 % of readings, one reading's allowance), without a lasting overload", async () => {
    assert.ok(sampler);
    const from = Math.max(bandReachedAt, Date.now());
    await new Promise((done) => setTimeout(done, STEADY_INTERVALS * INTERVAL_MS + 500));
    const decisions = sampler.decisions(from);
    const readings = decisions.map((d) => d.load);
    // The simulated cluster's tasks run on this process's timers, and its load is read through
    // Prometheus: on a loaded machine (the end-to-end lane runs files side by side) late timers move a
    // reading by up to ±0.02 around the loop's own aim (0.955 and 0.879 at load 7 on a clean clone).
    // Counted as inside: the band widened by that reading noise; every reading must still be within
    // ±0.05 of it, and no overload may last.
    const inside = readings.filter((l) => inBand(l, READING_NOISE)).length;
    const share = inside / readings.length;
    const near = readings.filter((l) => inBand(l, 0.05)).length / readings.length;
    const overloadMs = longestOverloadMs(from);
    console.log(
      `# steady: ${readings.length} readings, ${(share * 100).toFixed(0)} % in [${LOW}, ${HIGH}], ${(near * 100).toFixed(0)} % within ±0.05; ` +
        `longest overload ${overloadMs} ms; load@limit/in use ${decisions.map((d) => `${fmt(d.load)}@${d.limit}/${d.inUse}`).join(" ")}`,
    );
    assert.ok(readings.length >= STEADY_INTERVALS - 1, `only ${readings.length} decisions in ${STEADY_INTERVALS} intervals`);
    // Stated tolerance: one reading of the run may fall outside beyond the goal's 20 %.
    assert.ok(
      (inside + 1) / readings.length >= 0.8,
      `only ${inside} of ${readings.length} readings inside the band ±${READING_NOISE} (${(share * 100).toFixed(0)} % strictly inside)`,
    );
    assert.ok(near === 1, `${(near * 100).toFixed(0)} % of readings within ±0.05 of the band`);
    assert.ok(overloadMs <= INTERVAL_MS, `overload lasted ${overloadMs} ms (> one interval)`);
  });

  it("after the cluster loses half its capacity, is strictly back inside the band within 5 intervals (one reading's allowance)", async () => {
    assert.ok(sampler && cluster);
    const before = (await sampler.now()).limit ?? 0;
    const lostAt = Date.now();
    cluster.setCapacity(CORES / 2);
    // The loss shows in a reading above the band first; from then on, the first reading inside it.
    const seen = await waitUntil("a reading above the band after the loss", 4 * INTERVAL_MS, () =>
      sampler?.decisions(lostAt).find((d) => (d.load ?? 0) > HIGH),
    );
    const after = () =>
      sampler
        ?.decisions(lostAt)
        .map((d) => `${fmt(d.load)}@${d.limit}`)
        .join(" ");
    const back = await waitUntil("a reading inside the band after the loss", 8 * INTERVAL_MS, () =>
      sampler?.decisions((seen.lastDecisionAt ?? lostAt) + 1).find((d) => inBand(d.load)),
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}; readings@limits since the loss: ${after()}`);
    });
    // Counted to the decision that acted on the reading (its time in DescribeThrottlers), not to
    // when the sampler saw it.
    const intervals = ((back.lastDecisionAt ?? back.at) - lostAt) / INTERVAL_MS;
    console.log(
      `# capacity halved: limit ${before} -> ${back.limit}, strictly inside the band after ${intervals.toFixed(1)} intervals; ` +
        `longest overload after the loss ${longestOverloadMs(lostAt)} ms; readings@limits ${after()}`,
    );
    // Stated tolerance: 5 intervals plus one reading (one interval) — on a loaded 2-core machine a
    // scrape that lands late pushes the loss, or the cut, into the next reading — and a loss that
    // falls between two decisions shows first as a reading just above the band, which the law
    // treats as noise. The virtual-time test: inside within 5 intervals when the loss falls at a
    // decision, 3.75–5.75 (mostly 5.25 or more) when it falls between two.
    assert.ok(intervals <= 6, `strictly inside the band only after ${intervals.toFixed(1)} intervals: ${after()}`);
    assert.ok((back.limit ?? Infinity) < before, `the limit came down (${before} -> ${back.limit})`);
  });

  it("dry_run moves only the suggested limit", async () => {
    assert.ok(sampler && cluster);
    await reconfigure({ dry_run: true });
    const frozen = (await sampler.now()).limit;
    const since = Date.now();
    cluster.setCapacity(CORES); // the load falls: the loop would raise
    const moved = await waitUntil("the suggestion moving above the limit in force", 6 * INTERVAL_MS, async () => {
      const now = await sampler?.now();
      return now && (now.adaptive?.suggestedLimit ?? 0) > (frozen ?? 0) ? now : undefined;
    });
    const inForce = sampler.samples.filter((s) => s.at >= since).map((s) => s.limit);
    console.log(`# dry run: limit in force ${frozen}, suggested ${moved.adaptive?.suggestedLimit}`);
    assert.ok(
      inForce.every((l) => l === frozen),
      `the limit in force moved under dry_run: ${[...new Set(inForce)].join(", ")}`,
    );
    assert.equal(moved.adaptive?.dryRun, true);
    await reconfigure({ dry_run: false });
    const applied = await sampler.now();
    assert.equal(applied.limit, applied.adaptive?.suggestedLimit, "dry_run off puts the suggestion in force");
  });

  it("Prometheus stopped: holds, then falls to min_limit and keeps running; back: the loop resumes", async () => {
    assert.ok(sampler && cluster && prometheus && run);
    const script = await prometheusScript();
    const held = (await sampler.now()).limit;
    const stoppedAt = Date.now();
    await script.stopPrometheus(prometheus.pid);
    const fellAt = await waitUntil("the fallback to min_limit", 6 * INTERVAL_MS, async () => ((await sampler?.now())?.limit === 3 ? Date.now() : undefined));
    const during = sampler.samples.filter((s) => s.at >= stoppedAt && s.at < fellAt - 500).map((s) => s.limit);
    console.log(`# Prometheus down: limit ${held} held for ${((fellAt - stoppedAt) / 1000).toFixed(1)} s, then min_limit`);
    assert.ok(during.length > 0 && during.every((l) => l === held), `the limit did not hold first: ${during.join(" ")}`);
    assert.ok(fellAt - stoppedAt >= 2 * INTERVAL_MS - 500, "it fell before two failed readings");
    assert.match(
      run.stdout,
      /adaptive cluster_tasks: fallback limit [\d.]+ -> 3: 3 failed readings in a row \(Prometheus at http:\/\/127\.0\.0\.1:\d+ did not answer/,
    );
    // Tasks keep completing at min_limit (a task takes 2 s at most), while Prometheus starts again.
    const completed = cluster.stats().completed;
    // The stopped server is no longer after()'s to stop; the restarted one is, even if the wait throws.
    prometheus = undefined;
    const restarting = script.startPrometheus({ home: prometheusHome, port: prometheusPort, freshData: false });
    try {
      await waitUntil("a task completing at min_limit", INTERVAL_MS, () => (cluster && cluster.stats().completed > completed ? true : undefined), 50);
    } finally {
      prometheus = await restarting;
    }
    const resumed = await waitUntil("the loop raising the limit again", 30_000, async () => {
      const now = await sampler?.now();
      return now && (now.limit ?? 0) > 3 ? now : undefined;
    });
    console.log(`# Prometheus back: limit ${resumed.limit} after ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s`);
    assert.equal(run.process.exitCode, null, "the pipeline kept running");
  });
});
