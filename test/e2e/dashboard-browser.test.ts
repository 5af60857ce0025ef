// services: processes, chromium
// heavy: takes two of the end-to-end lane's slots (many processes, a browser or a private broker)
// The controller's dashboard in a real browser (Debian's headless Chromium driven by playwright-core)
// while a real pipeline runs: the page loads without console errors, shows a panel per throttler, its
// numbers move, the class shares come out as the weights say, each computation's "Epoch parts time"
// chart draws the worker's part histograms (docs/design.md §15), and a screenshot is saved. The screenshot
// goes to test/artifacts/ (ignored by git): a test run changes no committed file. The picture in
// docs/operations/observability.md, docs/dashboard.png, is renewed on purpose with
// SLUICE_UPDATE_SCREENSHOTS=1. Chromium is installed by .ci/run, not here.
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { assertChromium, openPage, skipWithoutChromium } from "../support/browser.ts";
import { get } from "../support/prometheus.ts";
import { NOOP_COMPUTATION, ROOT, sluice, writeSpec, type Child } from "../support/processes.ts";
import { writeTwoClassPipeline } from "../support/two-class-pipeline.ts";

const SCREENSHOT = process.env["SLUICE_UPDATE_SCREENSHOTS"] === "1" ? join(ROOT, "docs/dashboard.png") : join(ROOT, "test/artifacts/dashboard.png");

const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const skip = skipWithoutChromium;

// The three tests run side by side, each with its own processes and browser: each mostly waits (on
// the rate and share windows, on a controller's samples), and every browser stays open until the
// file ends anyway (the cleanups above).
describe("the dashboard in Chromium", { concurrency: true }, () => {
  it("the dashboard of a running pipeline loads cleanly, moves, and shares the limit by weight", { skip, timeout: 300_000 }, async () => {
    assertChromium();
    const run: Child = sluice(["run", writeTwoClassPipeline(), "--http-port", "0", "--quiet"]);
    cleanups.push(async () => {
      run.kill("SIGKILL");
      await run.exited;
    });
    const url = `http://127.0.0.1:${(await run.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\//))[1]}/`;
    assert.equal((await get(url, 30_000)).status, 200); // generous: a loaded machine answers late

    const page = await openPage(cleanups);
    const errors: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error") errors.push(`console: ${message.text()}`);
    });
    page.on("pageerror", (error) => errors.push(`page: ${error.message}`));
    page.on("requestfailed", (request) => errors.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ""}`));

    await page.goto(url, { timeout: 15_000 });
    assert.match(await page.title(), /Sluice · pipeline "two-classes"/);
    const api = page.locator('[data-throttler="api_quota"]');
    await api.waitFor({ timeout: 10_000 });
    await page.locator('[data-throttler="bytes_quota"]').waitFor({ timeout: 10_000 });
    assert.equal(await page.locator("[data-throttler]").count(), 2, "one panel per throttler");
    assert.equal((await api.locator('[data-stat="limit"]').innerText()).replace(/\s+/g, ""), "300/s");

    // The numbers move: the granted rate as the run starts and a moment later, and the total, which only grows.
    const rate = () => api.locator('[data-stat="granted-rate"]').innerText();
    const total = async () => parseAmount(await api.locator('[data-stat="granted-total"]').innerText());
    const firstRate = await rate();
    const firstTotal = await total();
    const changed = await pollUntil(async () => (await rate()) !== firstRate, 15_000);
    assert.ok(changed, `the granted rate still reads ${firstRate} after 15 s`);
    await page.waitForTimeout(1_500);
    assert.ok((await total()) > firstTotal, "the granted total grows");

    // Long enough for the 5 s rate window and the share window to settle, and for the charts to show a story.
    await page.waitForTimeout(15_000);
    const rateNow = parseAmount(await rate());
    assert.ok(rateNow >= 200 && rateNow <= 330, `granted rate ${rateNow}/s held near the 300/s limit`);
    const share = async (classId: string) => parseAmount(await api.locator(`[data-class="${classId}"] [data-share="observed"]`).innerText()) / 100;
    const interactive = await share("interactive");
    const batch = await share("batch");
    assert.ok(Math.abs(interactive - 0.75) <= 0.15, `interactive (weight 3 of 4) got ${(interactive * 100).toFixed(0)} % of the grants`);
    assert.ok(Math.abs(batch - 0.25) <= 0.15, `batch (weight 1 of 4) got ${(batch * 100).toFixed(0)} % of the grants`);
    assert.equal((await api.locator('[data-chart="rate"] polygon').count()) > 0, true, "the rate chart has drawn its areas");
    assert.equal(await page.locator("#state").innerText(), "live");
    assert.equal(await api.locator("[data-adaptive]").isVisible(), false, "no adaptive charts for a throttler without an adaptive loop");

    // Epoch parts time (docs/design.md §15): a chart per computation, drawn from the worker's part histograms
    // on /metrics. Both computations are backlogged behind a 300/s limit: they mostly wait for quota.
    for (const computation of ["Batch", "Interactive"]) {
      const chart = page.locator(`#epoch-parts [data-computation="${computation}"]`);
      await chart.waitFor({ timeout: 10_000 });
      assert.match(await chart.locator("h3").innerText(), new RegExp(`^Epoch parts time · ${computation}`));
      assert.ok((await chart.locator('[data-chart="epoch-parts"] polygon').count()) >= 1, `${computation}: the stacked areas are drawn`);
      const shares = await chart.locator("[data-shares]").innerText();
      const match = /throttle (\d+)% · process (\d+)% · output (\d+)% · commit (\d+)%/.exec(shares);
      assert.ok(match, `${computation}: shares "${shares}"`);
      const [throttle, processing, output, commit] = match.slice(1).map(Number) as [number, number, number, number];
      assert.ok(Math.abs(throttle + processing + output + commit - 100) <= 3, `${computation}: shares add up to 100 % (rounded): ${shares}`);
      assert.ok(throttle >= 50, `${computation}: a backlogged computation behind its limit waits for quota most of the time: ${shares}`);
    }
    assert.equal(await page.locator("#epoch-parts [data-computation]").count(), 2, "one chart per computation");

    mkdirSync(dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    assert.ok(existsSync(SCREENSHOT));

    // Hovering a chart reads out the values at that moment.
    const chart = await api.locator('[data-chart="rate"]').boundingBox();
    assert.ok(chart);
    await page.mouse.move(chart.x + chart.width * 0.9, chart.y + chart.height * 0.5);
    const tip = api.locator('[data-chart="rate"] ~ .tip');
    await tip.waitFor({ state: "visible", timeout: 5_000 });
    assert.match(await tip.innerText(), /limit 300[^]*interactive \d+[^]*granted \d+\/s in all/);
    assert.deepEqual(errors, [], "no console errors, page errors or failed requests");
  });

  it("a concurrency throttler's chart draws units in use and holders against the limit, not a rate", { skip, timeout: 300_000 }, async () => {
    assertChromium();
    const specPath = writeSpec({
      pipeline: "held-units",
      streams: { input: { topic: "input" } },
      computations: { Noop: { module: NOOP_COMPUTATION, inputs: ["input"] } },
      dynamic_spec: { throttlers: { tasks: { kind: "concurrency", limit: 5, lease_timeout: "60s" } } },
    });
    const controller: Child = sluice(["controller", specPath, "--port", "0", "--http-port", "0"]);
    cleanups.push(async () => {
      controller.kill("SIGKILL");
      await controller.exited;
    });
    const address = `127.0.0.1:${(await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1]}`;
    const url = `http://127.0.0.1:${(await controller.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\//))[1]}/`;
    // Two holders: 3 units and 1 unit in use of 5.
    const client = createGrpcQuotaClient(address);
    cleanups.push(() => client.close());
    const hold = (clientId: string, amount: number) =>
      client.requestQuota(
        { throttlerId: "tasks", clientId, amount, timestampMs: Date.now(), quotaClassId: "", requestId: `${clientId}-1` },
        { deadlineAt: Date.now() + 5_000 },
      );
    await hold("a", 3);
    await hold("b", 1);

    const page = await openPage(cleanups);
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(`page: ${error.message}`));
    await page.goto(url, { timeout: 15_000 });
    const tasks = page.locator('[data-throttler="tasks"]');
    await tasks.waitFor({ timeout: 10_000 });
    await page.waitForTimeout(3_000); // a few samples, so the chart has lines to draw
    assert.match(await tasks.locator('[data-title="rate"]').innerText(), /^Units in use vs limit/);
    assert.match(await tasks.locator('[data-legend="rate"]').innerText(), /in use[^]*holders[^]*limit/);
    const chart = await tasks.locator('[data-chart="rate"]').boundingBox();
    assert.ok(chart);
    await page.mouse.move(chart.x + chart.width * 0.97, chart.y + chart.height * 0.5);
    const tip = tasks.locator('[data-chart="rate"] ~ .tip');
    await tip.waitFor({ state: "visible", timeout: 5_000 });
    const text = await tip.innerText();
    assert.match(text, /limit 5/);
    assert.match(text, /holders 2/);
    assert.match(text, /in use 4/);
    assert.doesNotMatch(text, /\/s in all/, "no granted rate on a concurrency chart");
    const heldTile = tasks.locator('[data-stat="granted-rate"]').locator("..");
    assert.match(await heldTile.innerText(), /^in use\s+4\s*units[^]*80% of the limit in use · 2 holders/i, "the tile shows units held, not a rate");
    assert.deepEqual(errors, []);
  });

  it("a keyed throttler's panel shows its keys and the same top keys by wait as /metrics", { skip, timeout: 300_000 }, async () => {
    assertChromium();
    const specPath = writeSpec({
      pipeline: "keyed-dashboard",
      streams: { input: { topic: "input" } },
      computations: { Noop: { module: NOOP_COMPUTATION, inputs: ["input"] } },
      dynamic_spec: { throttlers: { per_customer: { limit: 1, period: "1s", keyed: { max_keys: 3 } }, plain: { limit: 100 } } },
    });
    const controller: Child = sluice(["controller", specPath, "--port", "0", "--http-port", "0"]);
    cleanups.push(async () => {
      controller.kill("SIGKILL");
      await controller.exited;
    });
    const address = `127.0.0.1:${(await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1]}`;
    const url = `http://127.0.0.1:${(await controller.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\//))[1]}/`;
    const client = createGrpcQuotaClient(address);
    cleanups.push(() => client.close());
    let n = 0;
    const ask = (key: string, amount: number) =>
      client.requestQuota(
        { throttlerId: "per_customer", clientId: "c", amount, timestampMs: Date.now(), quotaClassId: "", requestId: `k-${n++}`, key },
        { deadlineAt: Date.now() + 30_000 },
      );
    // At 1/s, slow owes 5 s and medium 2 s: their next requests wait about that long, a loaded machine's
    // stalls between the calls aside (seconds of margin).
    await ask("slow", 6);
    await ask("medium", 3);
    await ask("quick", 1); // never waits: not a top key
    await Promise.all([ask("slow", 1), ask("medium", 1)]);
    await assert.rejects(ask("fourth", 1), /max_keys of 3/);

    const page = await openPage(cleanups);
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(`page: ${error.message}`));
    await page.goto(url, { timeout: 15_000 });
    const keyed = page.locator('[data-throttler="per_customer"]');
    await keyed.waitFor({ timeout: 10_000 });
    const keys = keyed.locator("[data-keyed]");
    await keys.waitFor({ state: "visible", timeout: 10_000 });
    assert.match(
      await keys.locator("[data-keys-summary]").innerText(),
      /^3 keys live of max 3 \(3 with a bucket, the rest parked\) · 1 refused · 0 forgotten · idle_timeout 10 min$/,
    );
    const shown = await keys.locator("[data-key]").evaluateAll((rows) => rows.map((row) => row.getAttribute("data-key")));
    const metrics = await get(`${url}metrics`);
    const exported = [...metrics.body.matchAll(/^sluice_controller_throttler_top_key_wait_ms\{throttler_id="per_customer",key="([^"]+)"\} (\S+)$/gm)]
      .sort((a, b) => Number(b[2]) - Number(a[2]))
      .map((match) => match[1]);
    assert.deepEqual(shown, ["slow", "medium"], "most waited first");
    assert.deepEqual(shown, exported, "the same top keys as /metrics");
    assert.match(await keys.locator('[data-key="slow"] [data-waited]').innerText(), /\d/);
    assert.equal(await page.locator('[data-throttler="plain"] [data-keyed]').isVisible(), false, "no keys box for a throttler that is not keyed");
    assert.deepEqual(errors, []);
  });
});

/** "1.2k units", "300/s", "75%" → 1200, 300, 75. */
function parseAmount(text: string): number {
  const match = /(-?[\d.]+)\s*([kMG]?)/.exec(text.replace(/\s+/g, " "));
  assert.ok(match, `no number in "${text}"`);
  const factor = { "": 1, k: 1e3, M: 1e6, G: 1e9 }[match[2] ?? ""] ?? 1;
  return Number(match[1]) * factor;
}

async function pollUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return false;
}
