import type { PipelineSpec } from "@sluice/spec";
import type { IoFactory } from "@sluice/runtime";

/** Kafka-backed streams for a spec with a `kafka` section; creates missing topics first. */
export async function createKafkaIo(spec: PipelineSpec): Promise<IoFactory> {
  const { KafkaIoFactory } = await import("@sluice/kafka");
  const io = new KafkaIoFactory(spec, {
    clientId: spec.kafka?.client_id ?? `sluice-${spec.pipeline}`,
    source: {
      sessionTimeoutMs: spec.kafka?.session_timeout ?? 30_000,
      heartbeatIntervalMs: Math.max(500, Math.floor((spec.kafka?.session_timeout ?? 30_000) / 10)),
    },
  });
  await io.ensureTopics(spec);
  return io;
}
