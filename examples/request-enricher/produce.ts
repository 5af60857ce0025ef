// Writes requests to the pipeline's `requests` topic at a steady rate, faster than the 100/s the
// external API allows, so the throttler has work to do and the lag shows on the dashboard.
//
//   node --import tsx examples/request-enricher/produce.ts [--brokers host:port,…] [--rate 150] [--count N]
//
// Defaults: brokers from $KAFKA_BROKERS, else the spec's kafka.brokers; 150 requests/s; until Ctrl-C.
// The topic is created with the spec's partition count before the first message, so a producer that
// starts before the workers does not leave a one-partition topic behind (broker auto-creation).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Kafka, logLevel, Partitioners } from "kafkajs";

interface Spec {
  readonly kafka: { readonly brokers: string[] };
  readonly streams: Record<string, { readonly topic: string; readonly partitions?: number }>;
}

const spec = JSON.parse(readFileSync(new URL("./pipeline.json", import.meta.url), "utf8")) as Spec;
const stream = spec.streams["requests"];
if (!stream) throw new Error("pipeline.json has no `requests` stream");

const { values } = parseArgs({
  options: {
    brokers: { type: "string" },
    rate: { type: "string", default: "150" },
    count: { type: "string" },
  },
});
const brokers = (values.brokers ?? process.env["KAFKA_BROKERS"] ?? spec.kafka.brokers.join(",")).split(",");
const ratePerSecond = Number(values.rate);
const count = values.count === undefined ? Number.POSITIVE_INFINITY : Number(values.count);
if (!(ratePerSecond > 0) || !(count >= 0)) throw new Error(`--rate must be > 0 and --count ≥ 0, got --rate ${values.rate} --count ${values.count}`);

const kafka = new Kafka({ clientId: "request-enricher-producer", brokers, logLevel: logLevel.WARN, retry: { retries: 10 } });
const admin = kafka.admin();
await admin.connect();
if (!(await admin.listTopics()).includes(stream.topic)) {
  await admin.createTopics({ topics: [{ topic: stream.topic, numPartitions: stream.partitions ?? 1, replicationFactor: 1 }], waitForLeaders: true });
}
await admin.disconnect();

const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
await producer.connect();
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => (stopping = true));

const PATHS = ["/checkout", "/search", "/profile", "/cart", "/orders"];
const BATCH_MS = 100;
const startedAt = Date.now();
let sent = 0;
let reportedAt = startedAt;
console.log(`producing to "${stream.topic}" on ${brokers.join(",")} at ${ratePerSecond}/s${Number.isFinite(count) ? `, ${count} requests` : " until Ctrl-C"}`);
while (!stopping && sent < count) {
  // Whatever is due by now, in one send: a steady rate without a timer per message.
  const due = Math.min(count, Math.floor(((Date.now() - startedAt) * ratePerSecond) / 1000) + 1);
  const messages: { key: string; value: string }[] = [];
  for (let n = sent; n < due; n++) {
    const customerId = `c${(n * 7919) % 5000}`;
    messages.push({ key: customerId, value: JSON.stringify({ requestId: `r${n}`, customerId, path: PATHS[n % PATHS.length], at: Date.now() }) });
  }
  if (messages.length > 0) {
    await producer.send({ topic: stream.topic, messages, acks: -1 });
    sent += messages.length;
  }
  if (Date.now() - reportedAt >= 5000) {
    reportedAt = Date.now();
    console.log(`${sent} requests produced (${((sent * 1000) / (reportedAt - startedAt)).toFixed(0)}/s)`);
  }
  await new Promise((resolve) => setTimeout(resolve, BATCH_MS));
}
await producer.disconnect();
console.log(`done: ${sent} requests produced in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
