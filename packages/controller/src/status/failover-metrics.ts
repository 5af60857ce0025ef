import type { FailoverStatus } from "../quota/failover-status.ts";
import type { PrometheusText } from "@sluice/status-http";

// docs/design.md §5.2 on /metrics: which controller leads, since when, the elections so far and the age of
// the persisted state. Written only by a controller of a failover group (a `kafka` section).

export function writeFailoverMetrics(out: PrometheusText, status: FailoverStatus): void {
  const seconds = (ms: number | null) => (ms === null ? [] : [{ labels: {}, value: ms / 1000 }]);
  const since = status.leaderSince === null ? null : Date.parse(status.leaderSince);
  out
    .gauge("sluice_controller_failover_leader", "1 while this controller leads its failover group and serves quota, else 0.", [
      { labels: {}, value: status.role === "leader" ? 1 : 0 },
    ])
    .gauge("sluice_controller_failover_info", "Always 1; the labels say this controller's role and the leader it knows.", [
      { labels: { role: status.role, address: status.address, leader: status.leader ?? "" }, value: 1 },
    ])
    .gauge("sluice_controller_failover_leader_since_seconds", "Unix time the current leadership began; absent while no leader is known.", seconds(since))
    .gauge(
      "sluice_controller_failover_generation",
      "Group generation of the latest election seen (the leadership's epoch).",
      status.generation === null ? [] : [{ labels: {}, value: status.generation }],
    )
    .counter("sluice_controller_failover_elections_total", "Elections (rebalances of the controller group) this controller has seen.", [
      { labels: {}, value: status.elections },
    ])
    .counter("sluice_controller_failover_leaderships_total", "Times this controller took the leadership on.", [{ labels: {}, value: status.leaderships }])
    .gauge(
      "sluice_controller_failover_state_age_seconds",
      "Seconds since the bucket balances were last persisted; absent before the first write.",
      seconds(status.stateAgeMs),
    )
    .gauge(
      "sluice_controller_failover_lease_remaining_seconds",
      "Seconds the leader's lease runs without another confirmed heartbeat; absent when not leading.",
      seconds(status.leaseRemainingMs),
    )
    .counter(
      "sluice_controller_state_write_errors_total",
      "Writes to the controller-state topic that failed (grants wait for a write that succeeds; /healthz answers 503 while the latest failed).",
      [{ labels: {}, value: status.stateWriteErrors }],
    );
}
