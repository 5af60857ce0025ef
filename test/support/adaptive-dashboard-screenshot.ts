// Writes docs/adaptive-dashboard.png: the example run on this machine — its own Prometheus, the
// simulated cluster, `sluice run` with the dashboard — photographed by Debian's headless Chromium
// after the loop reached the band and held it; the last 30 s on the charts include the cluster
// losing half its cores 16 s before the picture.
// Takes about 2 minutes:
//   node --import tsx test/support/adaptive-dashboard-screenshot.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { SimulatedCluster } from "../../examples/cluster-admission/simulated-cluster.ts";
import { examplePipeline, freePort } from "./adaptive-run.ts";
import { ROOT, sluice } from "./processes.ts";
import { prometheusScript, waitForNumber } from "./prometheus-server.ts";

const OUT = join(ROOT, "docs/adaptive-dashboard.png");
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

const script = await prometheusScript();
const home = mkdtempSync(join(tmpdir(), "sluice-prometheus-"));
const prometheus = await script.startPrometheus({ home, port: await freePort() });
const cluster = new SimulatedCluster({ cores: 64, name: "screenshot" });
const clusterUrl = await cluster.start(0);
const target = script.registerScrapeTarget(new URL(clusterUrl).host, {}, { home });
const run = sluice(["run", examplePipeline({ prometheusUrl: prometheus.url, clusterName: "screenshot" }).path, "--http-port", "0", "--quiet"], {
  CLUSTER_URL: clusterUrl,
});
const profile = mkdtempSync(join(tmpdir(), "sluice-chromium-"));
try {
  await waitForNumber(prometheus.url, 'cluster_cpu_utilisation{cluster="screenshot"}');
  const url = `http://127.0.0.1:${(await run.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\//, 60_000))[1]}/`;
  // The charts draw what the page saw in its last 30 s: open it well before the picture is taken.
  await sleep(60_000);
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1440, height: 900 },
  });
  const page = await browser.newPage();
  await page.goto(url, { timeout: 15_000 });
  await page.locator('[data-throttler="cluster_tasks"]').waitFor({ timeout: 15_000 });
  await sleep(14_000);
  cluster.setCapacity(32);
  await sleep(16_000);
  await page.screenshot({ path: OUT, fullPage: true });
  await browser.close();
  console.log(`wrote ${OUT}`);
} finally {
  await run.stop();
  target.remove();
  await cluster.stop();
  await script.stopPrometheus(prometheus.pid);
  rmSync(profile, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}
