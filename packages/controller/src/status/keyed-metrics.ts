import type { ControllerThrottlerSnapshot } from "../quota/controller-snapshot.ts";
import type { PrometheusText } from "@sluice/status-http";

// Keyed throttlers (docs/design.md §11.4) on /metrics without a series per key: the throttler's aggregates,
// and its `top_keys` keys by wait time over the last minute as the only series with a `key` label
// (never more than top_keys of them per throttler).

export function writeKeyedMetrics(out: PrometheusText, throttlers: readonly ControllerThrottlerSnapshot[]): void {
  const keyed = throttlers.flatMap((t) => (t.keyed ? [{ labels: { throttler_id: t.id }, k: t.keyed }] : []));
  out
    .gauge(
      "sluice_controller_throttler_keys",
      "Keyed throttlers: keys live now (each with a bucket of its own, or parked as its balance).",
      keyed.map(({ labels, k }) => ({ labels, value: k.keys })),
    )
    .gauge(
      "sluice_controller_throttler_max_keys",
      "Keyed throttlers: keyed.max_keys; a new key past it is refused with TOO_MANY_KEYS.",
      keyed.map(({ labels, k }) => ({ labels, value: k.maxKeys })),
    )
    .counter(
      "sluice_controller_throttler_refused_keys_total",
      "Keyed throttlers: requests for a new key refused with TOO_MANY_KEYS (a key asked for again counts again: refused keys are not remembered).",
      keyed.map(({ labels, k }) => ({ labels, value: k.refusedKeys })),
    )
    .counter(
      "sluice_controller_throttler_forgotten_keys_total",
      "Keyed throttlers: keys forgotten after keyed.idle_timeout without a request (only with a full bucket and nothing held).",
      keyed.map(({ labels, k }) => ({ labels, value: k.forgottenKeys })),
    )
    .gauge(
      "sluice_controller_throttler_top_key_wait_ms",
      "Keyed throttlers: the keyed.top_keys keys that waited most over the last minute, milliseconds waited in all, by key.",
      keyed.flatMap(({ labels, k }) => k.topKeys.map((top) => ({ labels: { ...labels, key: top.key }, value: top.waitedMs }))),
    );
}
