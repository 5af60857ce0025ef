// The baseline a Sluice worker is compared with: a bare kafkajs consumer group reading the same
// topic with eachBatch, decoding each JSON value, committing after each batch (kafkajs's default
// auto-commit), with as many partitions in flight as the topic has. No throttling, no framework.
// Events: joined {at, cpuMs}; finished {at, rows, cpuMs} once `rows` messages were read; with `profileTo`, a CPU
// profile of connect-to-finished written there, then profiled {path}.
import { Kafka, logLevel } from "kafkajs";
import { configArgument, emit } from "../lib/child-io.ts";

const cpuMs = () => {
  const cpu = process.cpuUsage();
  return (cpu.user + cpu.system) / 1000;
};
import { startWindowProfile } from "../lib/window-profile.ts";

interface Config {
  readonly brokers: readonly string[];
  readonly topic: string;
  readonly groupId: string;
  readonly partitions: number;
  readonly rows: number;
  readonly profileTo?: string;
}

const config = configArgument<Config>();
const kafka = new Kafka({ clientId: "bench-bare", brokers: [...config.brokers], logLevel: logLevel.ERROR });
const consumer = kafka.consumer({ groupId: config.groupId, maxWaitTimeInMs: 500 });
let rows = 0;
let finished = false;
consumer.on(consumer.events.GROUP_JOIN, () => emit({ type: "joined", at: performance.timeOrigin + performance.now(), cpuMs: cpuMs() }));
const profile = config.profileTo ? await startWindowProfile() : null;
await consumer.connect();
await consumer.subscribe({ topics: [config.topic], fromBeginning: true });
await consumer.run({
  partitionsConsumedConcurrently: config.partitions,
  eachBatch: async ({ batch }) => {
    for (const message of batch.messages) {
      if (message.value) JSON.parse(message.value.toString());
      rows += 1;
    }
    if (!finished && rows >= config.rows) {
      finished = true;
      emit({ type: "finished", at: performance.timeOrigin + performance.now(), rows, cpuMs: cpuMs() });
      const path = config.profileTo;
      if (profile && path) void profile.stop(path).then(() => emit({ type: "profiled", path }));
    }
  },
});

process.once("SIGTERM", () => {
  void consumer.disconnect().finally(() => process.exit(0));
});
