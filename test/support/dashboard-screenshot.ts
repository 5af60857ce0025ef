// Writes docs/dashboard.png, the picture of the dashboard in docs/operations/observability.md: a `sluice run` of two
// computations sharing a 300/s rows throttler by class weight (3:1), one of them spending 40 ms of
// Process per batch and sending outputs, photographed by Debian's headless Chromium after the charts
// have a minute of history. No test writes it (tests must not rewrite committed files).
// Takes about 80 s:
//   pnpm docs:screenshots        (node --import tsx test/support/dashboard-screenshot.ts)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { NOOP_COMPUTATION, ROOT, sluice, writeSpec } from "./processes.ts";
import { SEQUENCE_GENERATOR } from "./two-class-pipeline.ts";

const OUT = join(ROOT, "docs/dashboard.png");
const MESSAGES = 100_000;
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

const spec = writeSpec({
  pipeline: "two-classes",
  streams: {
    interactive: { topic: "interactive", partitions: 2, generator: { module: SEQUENCE_GENERATOR, messages: MESSAGES } },
    batch: { topic: "batch", partitions: 2, generator: { module: SEQUENCE_GENERATOR, messages: MESSAGES } },
    out: { topic: "out", partitions: 2 },
  },
  computations: {
    Interactive: { module: join(ROOT, "test/fixtures/slow-relay-computation.ts"), inputs: ["interactive"], outputs: ["out"], max_rows_per_batch: 20 },
    Batch: { module: NOOP_COMPUTATION, inputs: ["batch"], outputs: [], max_rows_per_batch: 20 },
  },
  dynamic_spec: {
    throttlers: {
      api_quota: { limit: 300, period: "1s", request_period: "200ms", classes: { interactive: { weight: 3 }, batch: { weight: 1 } } },
      bytes_quota: { limit: 20_000, period: "1s", request_period: "200ms" },
    },
    computations: {
      Interactive: { input_rows_throttler_id: "api_quota", input_rows_throttler_class_id: "interactive", input_bytes_throttler_id: "bytes_quota" },
      Batch: { input_rows_throttler_id: "api_quota", input_rows_throttler_class_id: "batch" },
    },
  },
});
const run = sluice(["run", spec, "--http-port", "0", "--quiet"]);
const profile = mkdtempSync(join(tmpdir(), "sluice-chromium-"));
try {
  const url = `http://127.0.0.1:${(await run.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\//, 60_000))[1]}/`;
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1440, height: 900 },
    timeout: 60_000,
  });
  const page = browser.pages()[0] ?? (await browser.newPage());
  await page.goto(url, { timeout: 60_000 });
  await page.locator('#epoch-parts [data-computation="Interactive"]').waitFor({ timeout: 60_000 });
  // The charts draw what the page saw: a minute of it, past the start burst of the bucket.
  await sleep(60_000);
  await page.screenshot({ path: OUT, fullPage: true });
  await browser.close();
  console.log(`wrote ${OUT}`);
} finally {
  await run.stop();
  rmSync(profile, { recursive: true, force: true });
}
