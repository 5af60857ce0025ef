// services: processes
// docs/design.md §15: `sluice_worker_iteration_part_seconds{computation_id, part}` on a running `sluice run`
// has the four parts for every computation, and its sums agree with the durations of the spans the
// same process exported (to an OTLP receiver in this test) for the same iterations.
//
// Tolerance: per computation and part, |metric sum − span durations| ≤ 5 % of the spans' sum +
// 2 ms per iteration. The job reads its clock (performance.now(), as the SDK's spans) just inside
// each span's start and end, so what differs is the SDK's work around those reads (a few µs per
// span, more while code is cold or the machine loaded). A throttle that did not wait counts 0 s,
// its span's sluice.throttle.wait_ms; an Output with nothing to send too.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, it } from "node:test";
import { OtlpCollector, type CollectedSpan } from "../support/otlp-collector.ts";
import { scrapeUntil, type Exposition } from "../support/prometheus.ts";
import { NOOP_COMPUTATION, ROOT, sluice, writeSpec, type Child } from "../support/processes.ts";

const MESSAGES = 400;
const BATCH = 50;
const PARTS = ["Input.Throttle", "Process", "Output", "Commit"] as const;
const METRIC = "sluice_worker_iteration_part_seconds";

const children: Child[] = [];
let collector: OtlpCollector | undefined;
after(async () => {
  for (const child of children) child.kill("SIGKILL");
  await collector?.close();
});

it("the iteration part histogram has every part of every computation, and its sums are the spans' durations", { timeout: 120_000 }, async () => {
  collector = await OtlpCollector.start();
  const spec = writeSpec({
    pipeline: "epoch-parts-metric",
    streams: {
      numbers: { topic: "numbers", partitions: 2, generator: { module: join(ROOT, "test/fixtures/sequence-generator.ts"), messages: MESSAGES } },
      out: { topic: "out", partitions: 2 },
    },
    computations: {
      // Throttled, 40 ms of Process per batch and an Output: every part takes time.
      Slow: { module: join(ROOT, "test/fixtures/slow-relay-computation.ts"), inputs: ["numbers"], outputs: ["out"], max_rows_per_batch: BATCH },
      // Unthrottled, nothing emitted: its parts are near zero, and still there.
      Idle: { module: NOOP_COMPUTATION, inputs: ["numbers"], outputs: [], max_rows_per_batch: BATCH },
    },
    dynamic_spec: {
      throttlers: { rows: { limit: 200, period: "1s", request_period: "200ms" } },
      computations: { Slow: { input_rows_throttler_id: "rows" } },
    },
  });
  // Export every 200 ms so the spans arrive while the test waits, not at exit.
  const run = sluice(["run", spec, "--http-port", "0", "--otlp", collector.endpoint, "--quiet"], { OTEL_BSP_SCHEDULE_DELAY: "200" });
  children.push(run);
  const base = `http://127.0.0.1:${(await run.waitFor(/sluice run: dashboard on http:\/\/127\.0\.0\.1:(\d+)\//, 60_000))[1]}`;

  // Done: every row processed by both, and every iteration's Commit durable (the Commit part is
  // recorded when the commit lands, after the iteration).
  const settled = (e: Exposition) =>
    ["Slow", "Idle"].every((c) => {
      const iterations = e.find("sluice_worker_computation_iterations_total", { computation_id: c });
      return (
        e.find("sluice_worker_computation_rows_total", { computation_id: c }) === MESSAGES &&
        iterations !== undefined &&
        PARTS.every((part) => e.find(`${METRIC}_count`, { computation_id: c, part }) === iterations)
      );
    });
  const metrics = await scrapeUntil(`${base}/metrics`, settled, 90_000, `${MESSAGES} rows through both computations, every commit durable`);
  assert.equal(metrics.types.get(METRIC), "histogram");

  const iterationsOf = (c: string) => metrics.value("sluice_worker_computation_iterations_total", { computation_id: c });
  // Each computation's spans of each part: children of its iteration spans.
  const spansOf = (c: string, part: string): CollectedSpan[] => {
    const iterations = new Set(collector!.spans.filter((s) => s.name === `${c} iteration`).map((s) => s.spanId));
    return collector!.spans.filter((s) => s.name === part && iterations.has(s.parentSpanId));
  };
  const expectedSpans = (c: string, part: string) => (c === "Idle" && part === "Input.Throttle" ? 0 : iterationsOf(c));
  const deadline = Date.now() + 30_000;
  while (!["Slow", "Idle"].every((c) => PARTS.every((part) => spansOf(c, part).length >= expectedSpans(c, part)))) {
    assert.ok(Date.now() < deadline, `spans not all exported after 30 s: ${collector.spans.length} received`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const report: string[] = [];
  for (const c of ["Slow", "Idle"]) {
    const iterations = iterationsOf(c);
    assert.ok(iterations >= MESSAGES / BATCH, `${c}: ${iterations} iterations for ${MESSAGES} rows in batches of at most ${BATCH}`);
    for (const part of PARTS) {
      const labels = { computation_id: c, part };
      assert.equal(metrics.value(`${METRIC}_count`, labels), iterations, `${c} ${part}: one observation per iteration`);
      assert.equal(metrics.value(`${METRIC}_bucket`, { ...labels, le: "+Inf" }), iterations);
      const metricS = metrics.value(`${METRIC}_sum`, labels);
      const spanS = spansOf(c, part).reduce((sum, s) => sum + (s.endMs - s.startMs), 0) / 1000;
      const tolerance = 0.05 * spanS + 0.002 * iterations;
      report.push(
        `${c} ${part}: metric ${(metricS * 1000).toFixed(3)} ms, spans ${(spanS * 1000).toFixed(3)} ms, diff ${((metricS - spanS) * 1000).toFixed(3)} ms (tolerance ${(tolerance * 1000).toFixed(1)} ms)`,
      );
      assert.ok(Math.abs(metricS - spanS) <= tolerance, report.join("\n"));
    }
  }
  // The throttled computation waited for quota (200/s for 400 rows) and spent 40 ms per batch in Process.
  assert.ok(metrics.value(`${METRIC}_sum`, { computation_id: "Slow", part: "Input.Throttle" }) > 0.2, report.join("\n"));
  assert.ok(metrics.value(`${METRIC}_sum`, { computation_id: "Slow", part: "Process" }) >= 0.039 * iterationsOf("Slow"), report.join("\n"));
  console.log(report.join("\n"));
});
