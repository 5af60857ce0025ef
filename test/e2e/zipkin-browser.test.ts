// services: processes, chromium, zipkin
// heavy: takes two of the end-to-end lane's slots (many processes, a browser or a private broker)
// docs/design.md §15: a trace UI without Docker. The quickstart runs with OpenTelemetry's Zipkin exporter
// (OTEL_TRACES_EXPORTER=zipkin) into a real Zipkin server (scripts/zipkin.mjs: the exec jar from
// Maven Central, in-memory storage), and Debian's headless Chromium opens the trace in Zipkin's own
// UI and finds an Input.Throttle span (Zipkin lower-cases names: "input.throttle") with the
// throttler's attributes. Chromium is installed by .ci/run; scripts/test.mjs starts the Zipkin
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, it } from "node:test";
import { assertChromium, openPage, skipWithoutChromium } from "../support/browser.ts";
import { ROOT, sluice, type Child } from "../support/processes.ts";

const ZIPKIN_SCRIPT = join(ROOT, "scripts/zipkin.mjs");

interface Zipkin {
  readonly url: string;
  readonly spansEndpoint: string;
  stop(): Promise<void>;
}
interface ZipkinSpan {
  readonly traceId: string;
  readonly id: string;
  readonly name?: string;
  readonly tags?: Record<string, string>;
}

const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const skip = skipWithoutChromium;

it("the quickstart's Input.Throttle span, exported to Zipkin, shows in Zipkin's UI with its throttler", { skip, timeout: 600_000 }, async () => {
  assertChromium();
  // Reuses the Zipkin scripts/test.mjs started; alone, starts one (fetching the jar on first use).
  const { ensureZipkin } = (await import(pathToFileURL(ZIPKIN_SCRIPT).href)) as { ensureZipkin: () => Promise<Zipkin> };
  const zipkin = await ensureZipkin();
  cleanups.push(() => zipkin.stop());

  // A worker id of our own: Zipkin keeps every test's spans, and the resource is in each span's tags.
  const workerId = `zipkin-test-${randomBytes(4).toString("hex")}`;
  const run: Child = sluice(["run", join(ROOT, "examples/quickstart/pipeline.json"), "--worker-id", workerId, "--quiet"], {
    OTEL_TRACES_EXPORTER: "zipkin",
    OTEL_EXPORTER_ZIPKIN_ENDPOINT: zipkin.spansEndpoint,
    OTEL_BSP_SCHEDULE_DELAY: "500",
  });
  cleanups.push(async () => {
    run.kill("SIGKILL");
    await run.exited;
  });
  assert.match(
    (await run.waitFor(/tracing to [^\n]*/, 60_000))[0],
    /^tracing to http:\/\/127\.0\.0\.1:\d+\/api\/v2\/spans \(Zipkin\) as sluice-worker and sluice-controller$/,
  );

  // A throttle span that waited (the quickstart's 500 rows/s binds after the first bucket), found
  // through Zipkin's own query API, as the UI's search does. At least 1 ms: the page is checked below
  // for a wait_ms that starts with a non-zero digit, which a wait of 0.7 ms (seen) is not.
  const query = new URLSearchParams({
    serviceName: "sluice-worker",
    spanName: "input.throttle",
    annotationQuery: `service.instance.id=${workerId}`,
    limit: "50",
    lookback: "3600000",
  });
  let span: ZipkinSpan | undefined;
  const deadline = Date.now() + 120_000;
  while (!span) {
    assert.ok(Date.now() < deadline, `no waited input.throttle span of worker ${workerId} in Zipkin after 120 s\n${run.stderr}`);
    const response = await fetch(`${zipkin.url}/api/v2/traces?${query}`, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
    const traces = response?.ok ? ((await response.json()) as ZipkinSpan[][]) : [];
    span = traces.flat().find((s) => s.name === "input.throttle" && Number(s.tags?.["sluice.throttle.wait_ms"] ?? 0) >= 1);
    if (!span) await new Promise((resolve) => setTimeout(resolve, 500));
  }
  assert.equal(span.tags?.["sluice.throttle.rows.throttler_id"], "rows_quota");

  const page = await openPage(cleanups, { timeoutMs: 60_000 });
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(`page: ${error.message}`));

  // The trace page of Zipkin's UI (Lens): the span tree ("<service>: <span name>" rows, the
  // controller's RequestQuota under the worker's throttle wait), then the chosen span's tags.
  await page.goto(`${zipkin.url}/zipkin/traces/${span.traceId}`, { timeout: 60_000 });
  const row = page.getByText("sluice-worker: input.throttle", { exact: true }).first();
  await row.waitFor({ timeout: 60_000 });
  for (const name of ["sluice-worker: squarer iteration", "sluice-worker: process", "sluice-worker: output", "sluice-worker: commit"]) {
    assert.ok((await page.getByText(name, { exact: true }).count()) > 0, `"${name}" in the span tree`);
  }
  assert.ok((await page.getByText("sluice-controller: requestquota", { exact: true }).count()) > 0, "the controller's RequestQuota span is in the trace");
  await row.click();
  // The span's details list its tags: the throttler, its class, the amount asked and the wait.
  await page.getByText("sluice.throttle.rows.throttler_id", { exact: true }).first().waitFor({ timeout: 30_000 });
  const body = await page.locator("body").innerText();
  assert.match(body, /Span name\s+input\.throttle/);
  assert.match(body, /sluice\.throttle\.rows\.throttler_id\s+rows_quota/);
  assert.match(body, /sluice\.throttle\.rows\.class_id\s+default/);
  assert.match(body, /sluice\.throttle\.rows\.amount\s+50/);
  assert.match(body, /sluice\.throttle\.wait_ms\s+[1-9]/);
  assert.deepEqual(errors, [], "no page errors in Zipkin's UI");
});
