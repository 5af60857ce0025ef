// services: kafka
// The Source and Sink contract (test/support/source-sink-contract.ts) over Kafka: KafkaSink and
// KafkaSource on a real broker, a topic and a consumer group of their own per case. Its memory-log
// half is test/integration/source-sink-memory.test.ts.
import { sourceSinkContract } from "../../../test/support/source-sink-contract.ts";
import { KafkaIoError, KafkaIoFactory } from "../src/index.ts";
import { pipelineSpec, uniqueName, useBroker } from "./kafka-test-kit.ts";

const broker = useBroker();

sourceSinkContract("Kafka", {
  async setup(t, partitions) {
    const topic = uniqueName("sluice-contract");
    const spec = pipelineSpec({
      pipeline: uniqueName("contract"),
      brokers: broker.brokers,
      streams: { events: { topic, partitions } },
      computations: { Reader: { inputs: ["events"] } },
    });
    const factory = new KafkaIoFactory(spec, { logLevel: "nothing", source: { heartbeatIntervalMs: 1_000, rebalanceTimeoutMs: 5_000 } });
    // Creating a topic while the previous case's is being deleted can answer the retriable
    // UNKNOWN_TOPIC_OR_PARTITION once: asked again, as a worker's start would.
    for (let attempt = 1; ; attempt++) {
      try {
        await factory.ensureTopics();
        break;
      } catch (error) {
        if (attempt >= 5 || !(error instanceof KafkaIoError) || !error.retriable) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
      }
    }
    t.after(async () => {
      await factory.close();
      await broker.admin.deleteTopics({ topics: [topic], timeout: 10_000 }).catch(() => undefined);
    });
    return { spec, factory };
  },
});
