// services: processes, jaeger
// The docs/design.md §10 promise, end to end: Input.Throttle is "exported to Jaeger by OTLP". Real `sluice`
// processes export to a real Jaeger (scripts/jaeger.mjs starts one, or reuses the one scripts/test.mjs
// started), and the traces are read back through Jaeger's HTTP query API: iteration spans of
// `sluice-worker` with an Input.Throttle child carrying the throttler, class, amount and wait_ms;
// under it the `sluice-controller` RequestQuota span — from another process, across gRPC, in the
// second case; and the summed wait agrees with the limit (tolerance in helpers/throttle-traces.ts).
// Every process is started here and ended by its own pid.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, it } from "node:test";
import { queryJaegerTraces } from "../support/jaeger-query.ts";
import type { CollectedSpan } from "../support/otlp-collector.ts";
import { type Child, ROOT, sluice, writeSpec, exitCodeWithin } from "../support/processes.ts";
import { checkThrottleTraces, type ThrottleTraceExpectation, type ThrottleTraceSummary } from "../support/throttle-traces.ts";
import { otelEnv, THROTTLED_EXPECTATION, throttledSpec } from "../support/traced-pipeline.ts";

interface Jaeger {
  /** OTLP/HTTP base URL, e.g. http://127.0.0.1:4318. */
  readonly otlpHttpEndpoint: string;
  /** Query service, e.g. http://127.0.0.1:16686. */
  readonly queryUrl: string;
  stop(): Promise<void>;
}

const JAEGER_SCRIPT = join(ROOT, "scripts/jaeger.mjs");
/** How long Jaeger may take to make exported spans queryable (its batch processor, then storage). */
const QUERY_TIMEOUT_MS = 30_000;

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

/**
 * Polls Jaeger until the pipeline's traces pass the checks (spans of one trace may arrive from two
 * processes at different times), or fails with the last check's message after QUERY_TIMEOUT_MS.
 */
async function tracesInJaeger(
  jaeger: Jaeger,
  pipeline: string,
  sinceMs: number,
  expectation: ThrottleTraceExpectation,
): Promise<{ spans: CollectedSpan[]; summary: ThrottleTraceSummary }> {
  const deadline = Date.now() + QUERY_TIMEOUT_MS;
  let lastProblem = "no traces yet";
  for (;;) {
    const all = await queryJaegerTraces(jaeger.queryUrl, {
      service: "sluice-worker",
      operation: `${expectation.computation} iteration`,
      startMs: sinceMs - 1000,
      endMs: Date.now() + 1000,
      limit: 1000,
      tags: { "sluice.pipeline": pipeline },
    });
    const ours = new Set(all.filter((s) => s.resource["sluice.pipeline"] === pipeline).map((s) => s.traceId));
    const spans = all.filter((s) => ours.has(s.traceId));
    if (spans.length > 0) {
      try {
        return { spans, summary: checkThrottleTraces(spans, expectation) };
      } catch (error) {
        lastProblem = error instanceof Error ? error.message : String(error);
      }
    }
    if (Date.now() > deadline) {
      throw new Error(`Jaeger at ${jaeger.queryUrl} has no complete traces of pipeline "${pipeline}" after ${QUERY_TIMEOUT_MS} ms: ${lastProblem}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

describe("traces in Jaeger", { skip: existsSync(JAEGER_SCRIPT) ? false : "scripts/jaeger.mjs (the local Jaeger) is not in this checkout" }, () => {
  let jaeger: Jaeger;
  before(async () => {
    const { ensureJaeger } = (await import(pathToFileURL(JAEGER_SCRIPT).href)) as { ensureJaeger: () => Promise<Jaeger> };
    jaeger = await ensureJaeger(); // reuses the Jaeger that scripts/test.mjs started; stop() then leaves it running
  });
  after(() => jaeger?.stop());

  it("sluice run (embedded controller): Input.Throttle with the controller's RequestQuota under it", async (t) => {
    const pipeline = `jaeger-embedded-${process.pid}-${Date.now()}`;
    const startedAt = Date.now();
    const run = sluice(["run", writeSpec(throttledSpec(pipeline)), "--drain", "--quiet", "--worker-id", "w-jaeger"], otelEnv(jaeger.otlpHttpEndpoint));
    children.push(run);
    assert.equal(await exitCodeWithin(run, 120_000), 0, run.stderr);

    const { spans, summary } = await tracesInJaeger(jaeger, pipeline, startedAt, { ...THROTTLED_EXPECTATION, controllerInAnotherProcess: false });
    t.diagnostic(`Jaeger: ${JSON.stringify(summary)}`);
    // A batch (50) exceeds the prefetch window (ceil(200 × 100 ms) = 20): every Input.Throttle
    // misses the pool and sends its own RequestQuota.
    assert.equal(summary.throttlesWithRequestQuota, summary.throttles);
    const controller = spans.find((s) => s.service === "sluice-controller");
    assert.equal(controller?.resource["service.instance.id"], "w-jaeger/controller");
  });

  it("sluice controller + sluice run: the controller's span, from another process over gRPC, is the child of Input.Throttle", async (t) => {
    const pipeline = `jaeger-remote-${process.pid}-${Date.now()}`;
    const startedAt = Date.now();
    const controller = sluice(["controller", writeSpec(throttledSpec(pipeline)), "--port", "0"], otelEnv(jaeger.otlpHttpEndpoint));
    children.push(controller);
    const port = (await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1];
    const run = sluice(
      ["run", writeSpec(throttledSpec(pipeline, `127.0.0.1:${port}`)), "--drain", "--quiet", "--worker-id", "w-jaeger-remote"],
      otelEnv(jaeger.otlpHttpEndpoint),
    );
    children.push(run);
    assert.equal(await exitCodeWithin(run, 120_000), 0, run.stderr);
    controller.kill("SIGTERM"); // its shutdown exports the RequestQuota spans still batched
    assert.equal(await exitCodeWithin(controller, 120_000), 0, controller.stderr);

    const { spans, summary } = await tracesInJaeger(jaeger, pipeline, startedAt, { ...THROTTLED_EXPECTATION, controllerInAnotherProcess: true });
    t.diagnostic(`Jaeger: ${JSON.stringify(summary)}`);
    assert.equal(summary.throttlesWithRequestQuota, summary.throttles);
    const rpc = spans.find((s) => s.service === "sluice-controller");
    assert.equal(rpc?.resource["process.pid"], controller.pid, "the RequestQuota span came from the `sluice controller` process");
    assert.equal(spans.find((s) => s.service === "sluice-worker")?.resource["process.pid"], run.pid);
  });
});
