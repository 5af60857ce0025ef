// The Source and Sink contract (test/support/source-sink-contract.ts) over the memory log, the
// embedded mode's streams. Its Kafka half is packages/kafka/test/source-sink-contract.test.ts.
import { MemoryIoFactory } from "@sluice/runtime";
import { validatePipelineSpec } from "@sluice/spec";
import { sourceSinkContract } from "../support/source-sink-contract.ts";

sourceSinkContract("memory log", {
  async setup(t, partitions) {
    const parsed = validatePipelineSpec({
      pipeline: "source-sink-memory",
      streams: { events: { topic: "events", partitions } },
      computations: { Reader: { module: "./unused.ts", inputs: ["events"] } },
    });
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    const factory = new MemoryIoFactory(parsed.value);
    t.after(() => factory.close());
    return { spec: parsed.value, factory };
  },
});
