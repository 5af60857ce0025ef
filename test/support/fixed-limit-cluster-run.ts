// The peer's static configuration beside the adaptive loop (bench/README.md, "Adaptive limits
// against a fixed limit"): the cluster-admission example run by `sluice run` with a *fixed*
// concurrency limit (default 59 cores: what the band needs at the start, read off the adaptive
// runs), 60 s on 64 cores, then 60 s after the cluster lost half of them. The load is read from the
// cluster itself as the example's query would answer it (mean utilisation over 4 s, every 2 s), so
// no Prometheus is needed. Prints the share of readings inside [0.90, 0.95] before and after the
// loss and the share of time the cluster was overloaded after it. About 2.5 minutes:
//   node --import tsx test/support/fixed-limit-cluster-run.ts [limit]
import { writeFileSync } from "node:fs";
import { SimulatedCluster } from "../../examples/cluster-admission/simulated-cluster.ts";
import { examplePipeline } from "./adaptive-run.ts";
import { sluice } from "./processes.ts";

const LIMIT = Number(process.argv[2] ?? 59);
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const cluster = new SimulatedCluster({ cores: 64, name: "fixed" });
const clusterUrl = await cluster.start(0);
const { path, spec } = examplePipeline({ prometheusUrl: "http://127.0.0.1:1", clusterName: "fixed" });
spec.dynamic_spec.throttlers["cluster_tasks"] = { kind: "concurrency", lease_timeout: "10s", limit: LIMIT };
writeFileSync(path, JSON.stringify(spec, null, 2));
const run = sluice(["run", path, "--controller-port", "0", "--quiet"], { CLUSTER_URL: clusterUrl });
const perSecond: number[] = [];
const demand: boolean[] = [];
try {
  await run.waitFor(/embedded controller listening on/, 60_000);
  const sampler = setInterval(() => demand.push(cluster.stats().demand > 1), 250);
  const scraper = setInterval(() => perSecond.push(cluster.stats().utilisation), 1_000);
  const readings: { phase: "before" | "after"; load: number }[] = [];
  let phase: "before" | "after" = "before";
  let lossAt = 0;
  const reader = setInterval(() => {
    const last = perSecond.slice(-4);
    if (last.length === 4) readings.push({ phase, load: last.reduce((a, b) => a + b, 0) / 4 });
  }, 2_000);
  await sleep(60_000);
  cluster.setCapacity(32);
  lossAt = demand.length;
  await sleep(4_000); // the first readings whose window lies wholly after the loss
  phase = "after";
  await sleep(56_000);
  clearInterval(sampler);
  clearInterval(scraper);
  clearInterval(reader);
  // Slow start is not part of a fixed limit, but the pipeline takes a few seconds to fill it.
  const before = readings.filter((r) => r.phase === "before").slice(5);
  const after = readings.filter((r) => r.phase === "after");
  const inside = (rs: typeof readings) => rs.filter((r) => r.load >= 0.9 && r.load <= 0.95).length / rs.length;
  const overloadedAfter = demand.slice(lossAt + 16).filter(Boolean).length / demand.slice(lossAt + 16).length;
  const pct = (x: number) => `${Math.round(x * 100)} %`;
  console.log(
    `fixed limit ${LIMIT}: ${before.length} readings before the loss, ${pct(inside(before))} inside [0.9, 0.95]; ` +
      `${after.length} after, ${pct(inside(after))} inside; overloaded ${pct(overloadedAfter)} of the time after the loss; ` +
      `readings before ${before.map((r) => r.load.toFixed(3)).join(" ")}; after ${after.map((r) => r.load.toFixed(3)).join(" ")}`,
  );
} finally {
  await run.stop();
  await cluster.stop();
}
