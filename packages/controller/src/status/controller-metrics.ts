import type { ControllerSnapshot, ControllerThrottlerSnapshot } from "../quota/controller.ts";
import { writeAlignmentMetrics } from "./alignment-metrics.ts";
import { writeFailoverMetrics } from "./failover-metrics.ts";
import { histogramWithMax, type PrometheusText, type Sample } from "@sluice/status-http";
import { writeKeyedMetrics } from "./keyed-metrics.ts";

// The controller's sensors (the reference's yt.flow.controller.distributed_throttler.*, see
// reference/ytflow.md §5) in Prometheus style: dots become underscores, counters end in _total,
// units are in the name, and the reference's tags become labels (`throttler_id`, `quota_class`).
//
//   reference                                  here
//   distributed_throttler.value                sluice_controller_throttler_granted_total
//   distributed_throttler.released             sluice_controller_throttler_released_total
//   distributed_throttler.queue_size           sluice_controller_throttler_queue_size
//   distributed_throttler.wait_time (timer)    sluice_controller_throttler_wait_time_ms (+ _max)
//   distributed_throttler.limit (−1 = ∞)       sluice_controller_throttler_limit
//   .classless_requests / .unknown_class_requests  sluice_controller_throttler_*_requests_total
//   .quota_class.{granted,refunded}            sluice_controller_quota_class_*_total
//   .quota_class.{pending_requests,pending_amount,weight}  sluice_controller_quota_class_* (gauges)
//   .quota_class.wait_time                     sluice_controller_quota_class_wait_time_ms (+ _max)

type ThrottlerValue = (t: ControllerThrottlerSnapshot) => number | null;

/** Writes every controller family; a family is written even when no throttler is declared. */
export function writeControllerMetrics(out: PrometheusText, snapshot: ControllerSnapshot): void {
  const throttlers = snapshot.throttlers;
  const perThrottler = (value: ThrottlerValue): Sample[] =>
    throttlers.flatMap((t) => {
      const v = value(t);
      return v === null ? [] : [{ labels: { throttler_id: t.id }, value: v }];
    });
  const classes = throttlers.flatMap((t) => t.classes.map((c) => ({ labels: { throttler_id: t.id, quota_class: c.id }, c })));

  out.gauge("sluice_controller_dynamic_spec_version", "Version of the dynamic_spec in force: 1 at start, +1 per applied reconfiguration.", [
    { labels: {}, value: snapshot.version },
  ]);

  out
    .counter(
      "sluice_controller_throttler_granted_total",
      "Units granted by the throttler's token bucket (the reference's `value`).",
      perThrottler((t) => t.counters.granted),
    )
    .counter(
      "sluice_controller_throttler_released_total",
      "Units given back by clients with ReleaseQuota (unused prefetch, explicit release()).",
      perThrottler((t) => t.counters.released),
    )
    .counter(
      "sluice_controller_throttler_refunded_total",
      "Units refunded to the bucket because a partly granted request was cancelled or expired.",
      perThrottler((t) => t.counters.refunded),
    )
    .gauge(
      "sluice_controller_throttler_queue_size",
      "Requests waiting in the throttler's queue now (detached requests excluded).",
      perThrottler((t) => t.pendingRequests),
    )
    .gauge(
      "sluice_controller_throttler_queue_amount",
      "Units still owed to the requests waiting now.",
      perThrottler((t) => t.pendingAmount),
    )
    .gauge(
      "sluice_controller_throttler_detached_requests",
      "Requests whose RPC deadline passed and that keep their place for a retry (grace period).",
      perThrottler((t) => t.detachedRequests),
    )
    .gauge(
      "sluice_controller_throttler_max_queue_size",
      "max_queue_size: one more waiting request is refused with QUEUE_FULL.",
      perThrottler((t) => t.maxQueueSize),
    )
    .gauge(
      "sluice_controller_throttler_limit",
      "Rate in force, units per second; -1 when unlimited (as the reference reports it).",
      perThrottler((t) => t.limit ?? -1),
    )
    .gauge(
      "sluice_controller_throttler_capacity",
      "Bucket capacity (limit x period), units; absent when unlimited.",
      perThrottler((t) => t.capacity),
    )
    .gauge(
      "sluice_controller_throttler_balance",
      "Tokens in the bucket now; negative while a pay-after grant is being paid off; absent when unlimited.",
      perThrottler((t) => t.balance),
    );
  histogramWithMax(
    out,
    "sluice_controller_throttler_wait_time_ms",
    "Time from a request's arrival to its final grant, milliseconds.",
    throttlers.map((t) => ({ labels: { throttler_id: t.id }, view: t.waitTime })),
  );
  out
    .counter(
      "sluice_controller_throttler_classless_requests_total",
      "Requests that named no quota class and went to `default`.",
      perThrottler((t) => t.counters.classlessRequests),
    )
    .counter(
      "sluice_controller_throttler_unknown_class_requests_total",
      "Requests that named a class the throttler does not declare and went to `default`.",
      perThrottler((t) => t.counters.unknownClassRequests),
    )
    .counter(
      "sluice_controller_throttler_refused_requests_total",
      "Requests refused at once, by reason: queue_full (QUEUE_FULL) or invalid_amount (INVALID_AMOUNT).",
      throttlers.flatMap((t) => [
        { labels: { throttler_id: t.id, reason: "queue_full" }, value: t.counters.refusedQueueFull },
        { labels: { throttler_id: t.id, reason: "invalid_amount" }, value: t.counters.refusedInvalidAmount },
      ]),
    )
    .counter(
      "sluice_controller_throttler_timed_out_requests_total",
      "Requests whose RPC deadline passed while queued (they keep their place for a retry).",
      perThrottler((t) => t.counters.timedOut),
    )
    .counter(
      "sluice_controller_throttler_cancelled_requests_total",
      "Requests cancelled by their caller; what they had been granted was refunded.",
      perThrottler((t) => t.counters.cancelled),
    )
    .counter(
      "sluice_controller_throttler_retried_requests_total",
      "Retries recognised by request id, by how they were answered: joined (still waiting), reattached (back at its place), replayed (already granted).",
      throttlers.flatMap((t) => [
        { labels: { throttler_id: t.id, outcome: "joined" }, value: t.counters.joined },
        { labels: { throttler_id: t.id, outcome: "reattached" }, value: t.counters.reattached },
        { labels: { throttler_id: t.id, outcome: "replayed" }, value: t.counters.replayed },
      ]),
    );

  writeAdaptiveMetrics(out, throttlers);
  out
    .gauge(
      "sluice_controller_throttler_in_use",
      "Concurrency throttlers: units in use now (granted, not yet released or expired).",
      perThrottler((t) => (t.concurrency ? (t.inUse ?? 0) : null)),
    )
    .gauge(
      "sluice_controller_throttler_holders",
      "Concurrency throttlers: clients holding units now.",
      perThrottler((t) => t.concurrency?.holders ?? null),
    )
    .counter(
      "sluice_controller_throttler_expired_leases_total",
      "Concurrency throttlers: leases that ended without renewal for lease_timeout (a crashed or cut-off holder).",
      perThrottler((t) => t.concurrency?.expiredLeases ?? null),
    )
    .counter(
      "sluice_controller_throttler_expired_units_total",
      "Concurrency throttlers: units given back because their lease ended.",
      perThrottler((t) => t.concurrency?.expiredUnits ?? null),
    );

  out
    .counter(
      "sluice_controller_quota_class_granted_total",
      "Units granted to the class.",
      classes.map(({ labels, c }) => ({ labels, value: c.granted })),
    )
    .counter(
      "sluice_controller_quota_class_refunded_total",
      "Units refunded from the class's cancelled or expired requests.",
      classes.map(({ labels, c }) => ({ labels, value: c.refunded })),
    )
    .counter(
      "sluice_controller_quota_class_released_total",
      "Units released by clients of the class.",
      classes.map(({ labels, c }) => ({ labels, value: c.released })),
    )
    .gauge(
      "sluice_controller_quota_class_pending_requests",
      "Requests of the class waiting now (the chunk being dispatched excluded).",
      classes.map(({ labels, c }) => ({ labels, value: c.pendingRequests })),
    )
    .gauge(
      "sluice_controller_quota_class_pending_amount",
      "Units still owed to the class's waiting requests.",
      classes.map(({ labels, c }) => ({ labels, value: c.pendingAmount })),
    )
    .gauge(
      "sluice_controller_quota_class_weight",
      "Configured weight of the class (`default` is 1).",
      classes.map(({ labels, c }) => ({ labels, value: c.weight })),
    );
  histogramWithMax(
    out,
    "sluice_controller_quota_class_wait_time_ms",
    "Time from a request's arrival to its first granted chunk, milliseconds.",
    classes.map(({ labels, c }) => ({ labels, view: c.waitTime })),
  );
  writeKeyedMetrics(out, throttlers);
  writeAlignmentMetrics(out, snapshot.alignment ?? []);
  if (snapshot.failover) writeFailoverMetrics(out, snapshot.failover);
}

/** The adaptive loops (docs/design.md §11.3): the reading, the band, the suggestion, and what the loop did. */
function writeAdaptiveMetrics(out: PrometheusText, throttlers: readonly ControllerThrottlerSnapshot[]): void {
  const adaptive = throttlers.flatMap((t) => (t.adaptive ? [{ labels: { throttler_id: t.id }, a: t.adaptive }] : []));
  const gauge = (value: (a: NonNullable<ControllerThrottlerSnapshot["adaptive"]>) => number | null): Sample[] =>
    adaptive.flatMap(({ labels, a }) => {
      const v = value(a);
      return v === null ? [] : [{ labels, value: v }];
    });
  out
    .gauge(
      "sluice_controller_throttler_adaptive_load",
      "Last good load reading of an adaptive throttler (fraction of capacity); absent after a failed reading.",
      gauge((a) => a.load),
    )
    .gauge(
      "sluice_controller_throttler_adaptive_target_low",
      "Lower edge of the band the adaptive loop holds the load in.",
      gauge((a) => a.targetLow),
    )
    .gauge(
      "sluice_controller_throttler_adaptive_target_high",
      "Upper edge of the band the adaptive loop holds the load in.",
      gauge((a) => a.targetHigh),
    )
    .gauge(
      "sluice_controller_throttler_adaptive_suggested_limit",
      "Limit the adaptive loop decided; differs from sluice_controller_throttler_limit only under dry_run.",
      gauge((a) => a.suggestedLimit),
    )
    .gauge(
      "sluice_controller_throttler_adaptive_dry_run",
      "1 when the adaptive loop only suggests (dry_run), 0 when it applies its limit.",
      gauge((a) => (a.dryRun ? 1 : 0)),
    )
    .gauge(
      "sluice_controller_throttler_adaptive_consecutive_failures",
      "Failed load readings in a row; at 3 the limit falls to min_limit.",
      gauge((a) => a.consecutiveFailures),
    )
    .counter(
      "sluice_controller_throttler_adaptive_readings_total",
      "Load readings of the adaptive loop, by outcome: ok or failed (error, empty, not a number, or later than the interval).",
      adaptive.flatMap(({ labels, a }) => [
        { labels: { ...labels, outcome: "ok" }, value: a.counters.readings - a.counters.failedReadings },
        { labels: { ...labels, outcome: "failed" }, value: a.counters.failedReadings },
      ]),
    )
    .counter(
      "sluice_controller_throttler_adaptive_changes_total",
      "Limit changes decided by the adaptive loop, by action: raise, cut, fallback (to min_limit after repeated failed readings).",
      adaptive.flatMap(({ labels, a }) => [
        { labels: { ...labels, action: "raise" }, value: a.counters.raises },
        { labels: { ...labels, action: "cut" }, value: a.counters.cuts },
        { labels: { ...labels, action: "fallback" }, value: a.counters.fallbacks },
      ]),
    );
}
