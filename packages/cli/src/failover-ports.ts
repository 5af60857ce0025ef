import { systemClock } from "@sluice/core";
import type { ControllerElection, ControllerStateStore } from "@sluice/failover-ports";
import { KafkaControllerElection, KafkaControllerStateStore, createKafkaClient } from "@sluice/kafka";
import type { PipelineSpec } from "@sluice/spec";

/**
 * The lease of a leader as a share of `kafka.session_timeout` (LeaderLease): half leaves the other
 * half for the round trip of the confirming heartbeat and clock drift, and a heartbeat every sixth
 * of the session renews it twice over before it runs out.
 */
export const LEASE_SHARE_OF_SESSION = 0.5;

/** The election and state store of `sluice controller` with a `kafka` section (docs/design.md §2, §5.2). */
export function kafkaFailoverPorts(
  spec: PipelineSpec,
  log: (line: string) => void,
): (address: string) => { store: ControllerStateStore; election: ControllerElection } {
  return (address) => {
    const kafka = createKafkaClient(spec, {
      clientId: `sluice-${spec.pipeline}-controller`,
      log: (entry) => {
        // "Response <API>(…)" errors are broker answers kafkajs retries by itself (the coordinator
        // still loading at startup, a rebalance under way): noise, not news.
        if (entry.level === "error" && !entry.message.startsWith("Response ")) log(`kafka ${entry.namespace}: ${entry.message}`);
      },
    });
    return {
      store: new KafkaControllerStateStore({ kafka, pipeline: spec.pipeline, log }),
      election: new KafkaControllerElection({
        kafka,
        pipeline: spec.pipeline,
        address,
        sessionTimeoutMs: spec.kafka?.session_timeout ?? 30_000,
        // The FailoverController's clock (startFailoverController's default): one time base.
        clock: systemClock,
        log,
      }),
    };
  };
}

export function leaseMsOf(spec: PipelineSpec): number {
  return Math.floor((spec.kafka?.session_timeout ?? 30_000) * LEASE_SHARE_OF_SESSION);
}
