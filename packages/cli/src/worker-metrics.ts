import { histogramWithMax, type PrometheusText, type Sample } from "@sluice/status-http";
import { PART_BUCKETS_SECONDS, type AlignmentMetricsView, type ComputationStatsView, type ThrottlerMetricsView } from "@sluice/runtime";

// The worker's sensors in Prometheus style. The reference's worker sensors
// (yt.flow.worker.computation.throttlers.{consumed,released,wait_time}, tagged computation_id and
// throttler_id, and the RPC client's request_count / failed_request_count for RequestQuota; see
// reference/ytflow.md §5) plus the per-computation figures a Flink user reads first: records and
// bytes processed, failures, lag.
//
// Rendered here, in the CLI, rather than in @sluice/runtime: the runtime keeps the numbers
// (Worker.stats(), Worker.throttlerMetrics()) and stays free of prom-client, which the exposition
// writer of @sluice/status-http brings (docs/design.md §2.1); serving them is a concern of the
// process, which the CLI owns.

/** What the worker's /metrics reads: a Worker, or anything shaped like one. */
export interface WorkerMetricsSource {
  readonly workerId: string;
  stats(): readonly ComputationStatsView[];
  throttlerMetrics(): readonly ThrottlerMetricsView[];
  /** Watermark alignment (docs/design.md §12); absent = nothing aligned. */
  alignmentMetrics?(): readonly AlignmentMetricsView[];
}

export function writeWorkerMetrics(out: PrometheusText, pipeline: string, worker: WorkerMetricsSource): void {
  const stats = worker.stats();
  const throttlers = [...worker.throttlerMetrics()].sort((a, b) => a.computation.localeCompare(b.computation) || a.throttlerId.localeCompare(b.throttlerId));
  const perComputation = (value: (s: ComputationStatsView) => number | null): Sample[] =>
    stats.flatMap((s) => {
      const v = value(s);
      return v === null ? [] : [{ labels: { computation_id: s.computation }, value: v }];
    });
  const perThrottler = (value: (m: ThrottlerMetricsView) => number): Sample[] =>
    throttlers.map((m) => ({ labels: { computation_id: m.computation, throttler_id: m.throttlerId }, value: value(m) }));

  out.gauge("sluice_worker_info", "Always 1; labels name this worker and its pipeline.", [{ labels: { worker_id: worker.workerId, pipeline }, value: 1 }]);
  out
    .counter(
      "sluice_worker_computation_rows_total",
      "Messages processed (Process iterations that returned and were committed).",
      perComputation((s) => s.rows),
    )
    .counter(
      "sluice_worker_computation_bytes_total",
      "Bytes processed: key + value + headers of each message, before compression.",
      perComputation((s) => s.bytes),
    )
    .counter(
      "sluice_worker_computation_iterations_total",
      "Process iterations (batches) completed.",
      perComputation((s) => s.iterations),
    )
    .counter(
      "sluice_worker_computation_failures_total",
      "Failed iterations (process threw, output or commit failed); the job restarts from its last commit.",
      perComputation((s) => s.failures),
    )
    .counter(
      "sluice_worker_computation_throttle_wait_ms_total",
      "Time iterations waited in Input.Throttle, summed over jobs, milliseconds.",
      perComputation((s) => s.throttleWaitMs),
    )
    .gauge(
      "sluice_worker_computation_lag_ms",
      "Now minus the oldest lag timestamp of the jobs (oldest event time read and not processed + stream_delay), else of the last processed message, milliseconds; absent before the first.",
      perComputation((s) => s.lagMs),
    )
    .gauge(
      "sluice_worker_computation_active_jobs",
      "Jobs (input partitions) of the computation running on this worker.",
      perComputation((s) => s.activeJobs),
    );
  out.histogram(
    "sluice_worker_iteration_part_seconds",
    "Time the computation's iterations spent in each part (the iteration's child spans: Input.Throttle, Process, Output, Commit), seconds, summed over jobs; rate(_sum) is seconds per second in that part.",
    PART_BUCKETS_SECONDS,
    stats.flatMap((s) =>
      s.parts.map((p) => ({ labels: { computation_id: s.computation, part: p.part }, count: p.count, sum: p.sumSeconds, buckets: p.buckets })),
    ),
  );

  out
    .counter(
      "sluice_worker_throttler_consumed_total",
      "Units handed to callers by the throttler client (automatic input throttling and ctx.getThrottlerOrThrow).",
      perThrottler((m) => m.consumed),
    )
    .counter(
      "sluice_worker_throttler_released_total",
      "Units given back with release().",
      perThrottler((m) => m.released),
    )
    .counter(
      "sluice_worker_throttler_returned_total",
      "Prefetched units handed back to the controller with ReleaseQuota: what a landing refill brings above limit x request_period, and the pool when a client closes.",
      perThrottler((m) => m.returned),
    );
  histogramWithMax(
    out,
    "sluice_worker_throttler_wait_time_ms",
    "Time a throttle() call waited because the local prefetch pool could not answer at once, milliseconds.",
    throttlers.map((m) => ({
      labels: { computation_id: m.computation, throttler_id: m.throttlerId },
      view: { count: m.waitCount, sumMs: m.waitSumMs, maxMs: m.waitMaxMs, buckets: m.waitBuckets },
    })),
  );
  out
    .counter(
      "sluice_worker_quota_rpc_total",
      "RequestQuota calls sent to the controller, each retry counted.",
      perThrottler((m) => m.rpcCount),
    )
    .counter(
      "sluice_worker_quota_rpc_failures_total",
      "RequestQuota calls that failed (controller unreachable, deadline, refusal); most are retried.",
      perThrottler((m) => m.rpcFailures),
    );

  const aligned = worker.alignmentMetrics?.() ?? [];
  const perAligned = (value: (a: AlignmentMetricsView) => number | null): Sample[] =>
    aligned.flatMap((a) => {
      const v = value(a);
      return v === null ? [] : [{ labels: { computation_id: a.computation, alignment_group: a.group }, value: v }];
    });
  out
    .gauge(
      "sluice_worker_alignment_partitions",
      "Input partitions of the computation on this worker under watermark_alignment.",
      perAligned((a) => a.partitions),
    )
    .gauge(
      "sluice_worker_alignment_held_partitions",
      "Of those, partitions paused now because they are more than drift_bound ahead of their group.",
      perAligned((a) => a.held),
    )
    .gauge(
      "sluice_worker_alignment_group_watermark_ms",
      "Watermark of the partitions' alignment group (event time, epoch ms) as the controller last answered; absent while unknown.",
      perAligned((a) => a.groupWatermarkMs),
    );
}
