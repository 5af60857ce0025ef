import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { WAIT_BUCKETS_MS } from "@sluice/core";
import { PrometheusText } from "@sluice/status-http";
import { ITERATION_PARTS, PART_BUCKETS_SECONDS, type ComputationStatsView, type ThrottlerMetricsView } from "@sluice/runtime";
import { writeWorkerMetrics } from "../src/worker-metrics.ts";

// The worker's families from made-up views: names, labels and the figures they carry.

const stats = (computation: string, lagMs: number | null): ComputationStatsView => ({
  computation,
  rows: 120,
  bytes: 4096,
  iterations: 3,
  failures: 1,
  rowsPerSecond: 40,
  bytesPerSecond: 1365,
  throttleWaitMs: 750,
  throttleWaitRatio: 0.5,
  lagMs,
  activeJobs: 2,
  lastError: "boom",
  parts: ITERATION_PARTS.map((part, i) => ({
    part,
    count: 3,
    sumSeconds: 0.5 * (i + 1),
    buckets: PART_BUCKETS_SECONDS.map((bound) => (bound >= 0.25 ? 3 : 0)),
  })),
});

const throttler: ThrottlerMetricsView = {
  computation: "Enricher",
  throttlerId: "api",
  consumed: 118,
  released: 2,
  returned: 40,
  waitCount: 3,
  waitSumMs: 330,
  waitMaxMs: 200,
  waitBuckets: WAIT_BUCKETS_MS.map((bound) => [10, 120, 200].filter((w) => w <= bound).length),
  rpcCount: 7,
  rpcFailures: 1,
};

describe("worker metrics", () => {
  let text = "";
  let lines = new Set<string>();
  before(async () => {
    const out = new PrometheusText();
    writeWorkerMetrics(out, "enricher", { workerId: "w-1", stats: () => [stats("Enricher", 1500), stats("Idle", null)], throttlerMetrics: () => [throttler] });
    text = await out.render();
    lines = new Set(text.split("\n"));
  });

  it("labels per computation and per computation and throttler, as the reference tags them", () => {
    for (const line of [
      'sluice_worker_info{worker_id="w-1",pipeline="enricher"} 1',
      'sluice_worker_computation_rows_total{computation_id="Enricher"} 120',
      'sluice_worker_computation_bytes_total{computation_id="Enricher"} 4096',
      'sluice_worker_computation_failures_total{computation_id="Enricher"} 1',
      'sluice_worker_computation_throttle_wait_ms_total{computation_id="Enricher"} 750',
      'sluice_worker_computation_active_jobs{computation_id="Enricher"} 2',
      'sluice_worker_computation_lag_ms{computation_id="Enricher"} 1500',
      'sluice_worker_throttler_consumed_total{computation_id="Enricher",throttler_id="api"} 118',
      'sluice_worker_throttler_released_total{computation_id="Enricher",throttler_id="api"} 2',
      'sluice_worker_throttler_returned_total{computation_id="Enricher",throttler_id="api"} 40',
      'sluice_worker_quota_rpc_total{computation_id="Enricher",throttler_id="api"} 7',
      'sluice_worker_quota_rpc_failures_total{computation_id="Enricher",throttler_id="api"} 1',
      'sluice_worker_throttler_wait_time_ms_bucket{computation_id="Enricher",throttler_id="api",le="10"} 1',
      'sluice_worker_throttler_wait_time_ms_bucket{computation_id="Enricher",throttler_id="api",le="250"} 3',
      'sluice_worker_throttler_wait_time_ms_count{computation_id="Enricher",throttler_id="api"} 3',
      'sluice_worker_throttler_wait_time_ms_sum{computation_id="Enricher",throttler_id="api"} 330',
      'sluice_worker_throttler_wait_time_ms_max{computation_id="Enricher",throttler_id="api"} 200',
      'sluice_worker_iteration_part_seconds_sum{computation_id="Enricher",part="Input.Throttle"} 0.5',
      'sluice_worker_iteration_part_seconds_sum{computation_id="Enricher",part="Commit"} 2',
      'sluice_worker_iteration_part_seconds_count{computation_id="Enricher",part="Process"} 3',
      'sluice_worker_iteration_part_seconds_bucket{computation_id="Enricher",part="Output",le="0.1"} 0',
      'sluice_worker_iteration_part_seconds_bucket{computation_id="Enricher",part="Output",le="0.25"} 3',
      'sluice_worker_iteration_part_seconds_sum{computation_id="Idle",part="Output"} 1.5',
    ]) {
      assert.ok(lines.has(line), `${line}\nnot in\n${text}`);
    }
  });

  it("leaves the lag out until a computation has processed something", () => {
    assert.ok(!text.includes('sluice_worker_computation_lag_ms{computation_id="Idle"}'));
    assert.ok(lines.has('sluice_worker_computation_rows_total{computation_id="Idle"} 120'));
  });
});
