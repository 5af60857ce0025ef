import { kafkaSpecSchema, type PipelineSpec } from "@sluice/spec";
import { InvalidArgumentError } from "commander";

// `sluice worker --brokers`: the same spec file on a laptop (127.0.0.1:19092) and in Docker Compose
// (kafka:9092), as `--controller` already does for controller.address. Only the brokers change:
// topics, group ids and everything else stay the spec's.

/** Parses `host:port[,host:port…]` with the spec's own rule for `kafka.brokers`. */
export function parseBrokers(value: string): string[] {
  const brokers = value
    .split(",")
    .map((broker) => broker.trim())
    .filter((broker) => broker !== "");
  const parsed = kafkaSpecSchema.shape.brokers.safeParse(brokers);
  if (!parsed.success) {
    throw new InvalidArgumentError(`--brokers takes comma-separated "host:port" addresses such as "kafka:9092,127.0.0.1:19092", got "${value}"`);
  }
  return parsed.data;
}

/** The spec with its kafka.brokers replaced; a spec without a kafka section is returned unchanged. */
export function withBrokers(spec: PipelineSpec, brokers: readonly string[] | undefined): PipelineSpec {
  if (brokers === undefined || !spec.kafka) return spec;
  return { ...spec, kafka: { ...spec.kafka, brokers: [...brokers] } };
}
