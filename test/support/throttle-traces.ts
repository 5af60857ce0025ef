import assert from "node:assert/strict";
import type { CollectedSpan } from "./otlp-collector.ts";

/** What a throttled pipeline of one computation on one partition must show in its traces. */
export interface ThrottleTraceExpectation {
  readonly computation: string;
  readonly throttlerId: string;
  /** Class the computation's dynamic_spec entry names ("default" when none). */
  readonly classId: string;
  /** Rows the pipeline processed: Σ of the Input.Throttle amounts. */
  readonly rows: number;
  readonly maxRowsPerBatch: number;
  /** Throttler limit (rows/s), period (s) and request_period (s) of the spec. */
  readonly limit: number;
  readonly periodS: number;
  readonly requestPeriodS: number;
  /** The controller ran in another process than the worker (its spans carry another process.pid). */
  readonly controllerInAnotherProcess: boolean;
}

export interface ThrottleTraceSummary {
  readonly iterations: number;
  readonly throttles: number;
  readonly requestQuotas: number;
  /** Input.Throttle spans with at least one RequestQuota child. */
  readonly throttlesWithRequestQuota: number;
  readonly totalWaitMs: number;
  /** Time of the run not spent in Input.Throttle (Process, Output, Commit, fetching): the bucket refills meanwhile. */
  readonly busyMs: number;
  /** The bounds totalWaitMs was checked against. */
  readonly expectedWaitMs: { readonly min: number; readonly max: number };
}

/**
 * The tolerance of the summed throttle wait. The bucket starts full (limit × period rows at once);
 * the other N − limit × period rows come at `limit` per second, so the job waits about
 * W = (N − limit × period) / limit seconds in all. Pay-after grants the last request as soon as the
 * balance is back to 0, and the client may hold up to one refill (≤ max(batch, ceil(limit ×
 * request_period))) that is never waited for: the floor is W minus (batch + prefetch) / limit,
 * minus 150 ms of timer granularity, minus `busyMs` — the time the job spent elsewhere (Process,
 * Output, Commit, fetching) while the bucket went on refilling; it is a few ms per iteration in
 * memory, tens of ms on Kafka. The ceiling allows 15 % plus 300 ms for RPC round trips and
 * scheduling on a loaded 2-core machine.
 */
export function expectedWaitBoundsMs(e: ThrottleTraceExpectation, busyMs = 0): { min: number; max: number } {
  const waitMs = (Math.max(0, e.rows - e.limit * e.periodS) / e.limit) * 1000;
  const prefetch = Math.ceil(e.limit * e.requestPeriodS);
  const slackMs = ((e.maxRowsPerBatch + prefetch) / e.limit) * 1000;
  return { min: Math.max(0, waitMs - slackMs - 150 - busyMs), max: waitMs * 1.15 + 300 };
}

/**
 * Checks the trace shape of docs/design.md §3 in spans from any backend: each `<computation> iteration`
 * span of `sluice-worker` has one Input.Throttle child with the throttler, class, amount and
 * wait_ms; every `sluice-controller` RequestQuota span of those traces is the child of an
 * Input.Throttle span (the trace context crossed the RPC) and says what it granted; the summed wait
 * agrees with the limit (see expectedWaitBoundsMs).
 */
export function checkThrottleTraces(spans: readonly CollectedSpan[], e: ThrottleTraceExpectation): ThrottleTraceSummary {
  const iterations = spans.filter((s) => s.service === "sluice-worker" && s.name === `${e.computation} iteration`);
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const children = new Map<string, CollectedSpan[]>();
  for (const span of spans) {
    if (!span.parentSpanId) continue;
    const list = children.get(span.parentSpanId) ?? [];
    list.push(span);
    children.set(span.parentSpanId, list);
  }
  const rowsSeen = iterations.reduce((sum, s) => sum + Number(s.attributes["messaging.batch.message_count"]), 0);
  assert.equal(rowsSeen, e.rows, `the iteration spans cover ${rowsSeen} rows, expected ${e.rows} (${iterations.length} iterations)`);
  assert.ok(
    iterations.length >= Math.ceil(e.rows / e.maxRowsPerBatch),
    `${iterations.length} iterations for ${e.rows} rows in batches of ≤ ${e.maxRowsPerBatch}`,
  );

  const throttles: CollectedSpan[] = [];
  for (const iteration of iterations) {
    const own = (children.get(iteration.spanId) ?? []).filter((s) => s.name === "Input.Throttle");
    assert.equal(own.length, 1, `iteration ${iteration.spanId} has ${own.length} Input.Throttle children`);
    const throttle = own[0];
    if (!throttle) continue;
    assert.equal(throttle.service, "sluice-worker");
    assert.equal(throttle.traceId, iteration.traceId);
    assert.equal(throttle.attributes["sluice.throttle.rows.throttler_id"], e.throttlerId);
    assert.equal(throttle.attributes["sluice.throttle.rows.class_id"], e.classId);
    assert.equal(throttle.attributes["sluice.throttle.rows.amount"], iteration.attributes["messaging.batch.message_count"]);
    const waitMs = throttle.attributes["sluice.throttle.wait_ms"];
    assert.ok(typeof waitMs === "number" && waitMs >= 0, `wait_ms ${String(waitMs)}`);
    const names = new Set((children.get(iteration.spanId) ?? []).map((s) => s.name));
    for (const name of ["Process", "Output", "Commit"]) assert.ok(names.has(name), `iteration ${iteration.spanId} has a ${name} child`);
    // The Commit span ends when the offset after the batch is durable (not when it was handed over).
    const commit = (children.get(iteration.spanId) ?? []).find((s) => s.name === "Commit");
    const nextOffset = (BigInt(String(iteration.attributes["sluice.batch.last_offset"])) + 1n).toString();
    assert.equal(commit?.attributes["sluice.commit.offset"], nextOffset, `iteration ${iteration.spanId} commits offset ${nextOffset}`);
    assert.equal(commit?.attributes["sluice.commit.durable"], true, `the Commit span of iteration ${iteration.spanId} ended with its offset durable`);
    throttles.push(throttle);
  }

  const traceIds = new Set(iterations.map((s) => s.traceId));
  const workerPid = iterations[0]?.resource["process.pid"];
  const requestQuotas = spans.filter((s) => s.name === "RequestQuota" && traceIds.has(s.traceId));
  assert.ok(requestQuotas.length > 0, "the worker's traces hold RequestQuota spans of the controller");
  let granted = 0;
  for (const rpc of requestQuotas) {
    assert.equal(rpc.service, "sluice-controller", "RequestQuota spans carry the controller's service name");
    const parent = byId.get(rpc.parentSpanId);
    assert.ok(parent, `RequestQuota ${rpc.spanId} has its parent ${rpc.parentSpanId || "(none)"} in the trace`);
    assert.equal(parent.name, "Input.Throttle", "a RequestQuota span is the child of the Input.Throttle that sent it");
    assert.equal(parent.service, "sluice-worker");
    if (e.controllerInAnotherProcess) {
      assert.notEqual(rpc.resource["process.pid"], workerPid, "the controller's span comes from another process");
    }
    assert.equal(rpc.attributes["sluice.throttler_id"], e.throttlerId);
    assert.equal(rpc.attributes["sluice.quota.class_id"], e.classId);
    assert.ok(String(rpc.attributes["sluice.quota.request_id"]).length > 0, "request id");
    assert.match(String(rpc.attributes["sluice.quota.client_id"]), new RegExp(`/${e.computation}/0$`), "client id = <worker>/<computation>/<partition>");
    const amount = Number(rpc.attributes["sluice.quota.amount"]);
    assert.ok(amount > 0, `amount ${amount}`);
    assert.ok(Number(rpc.attributes["sluice.quota.waited_ms"]) >= 0, "waited_ms");
    const outcome = rpc.attributes["sluice.quota.outcome"];
    if (outcome === "granted") {
      assert.equal(rpc.attributes["sluice.quota.granted"], amount);
      granted += amount;
    } else {
      // A refill still in flight when the worker stops is cancelled (docs/design.md §9.5); nothing else fails here.
      assert.equal(outcome, "CANCELLED", `RequestQuota ${rpc.spanId} ended with ${String(outcome)}`);
      assert.equal(rpc.statusCode, 2, "a failed RequestQuota has the error status");
    }
  }
  assert.ok(granted >= e.rows - 1e-6, `the controller granted ${granted} rows in the traced RPCs, the job used ${e.rows}`);

  const throttlesWithRequestQuota = throttles.filter((t) => (children.get(t.spanId) ?? []).some((c) => c.name === "RequestQuota")).length;
  const totalWaitMs = throttles.reduce((sum, t) => sum + Number(t.attributes["sluice.throttle.wait_ms"]), 0);
  const runFromMs = Math.min(...iterations.map((s) => s.startMs));
  const runToMs = Math.max(...throttles.map((s) => s.endMs));
  const busyMs = Math.max(0, runToMs - runFromMs - totalWaitMs);
  const expectedWaitMs = expectedWaitBoundsMs(e, busyMs);
  assert.ok(
    totalWaitMs >= expectedWaitMs.min && totalWaitMs <= expectedWaitMs.max,
    `Σ Input.Throttle wait_ms = ${totalWaitMs.toFixed(0)} ms, expected ${expectedWaitMs.min.toFixed(0)}–${expectedWaitMs.max.toFixed(0)} ms ` +
      `(${e.rows} rows at ${e.limit}/s after a bucket of ${e.limit * e.periodS}; ${busyMs.toFixed(0)} ms of the run were spent elsewhere)`,
  );
  return {
    iterations: iterations.length,
    throttles: throttles.length,
    requestQuotas: requestQuotas.length,
    throttlesWithRequestQuota,
    totalWaitMs,
    busyMs,
    expectedWaitMs,
  };
}
