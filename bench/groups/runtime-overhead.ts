// Group 3: what the framework and its throttling cost a pipeline. Messages/s through a Sluice worker
// (its own process) over the memory log, then over a real Kafka broker against a bare kafkajs
// consumer reading the same topic. Throttlers are unlimited: only their overhead shows.
import { randomUUID } from "node:crypto";
import { BenchChild } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup, GroupContext } from "../lib/group.ts";
import { createTopic, ensureBroker, produce, type Broker } from "../lib/kafka.ts";
import { NOOP_COMPUTATION } from "../lib/specs.ts";

const PARTITIONS = 4;
const MAX_ROWS_PER_BATCH = 100;
const UNTHROTTLED = "Sluice, no throttler";
const GRPC = "Sluice, unlimited rows + bytes, controller over gRPC";
const EMBEDDED = "Sluice, unlimited rows + bytes, embedded controller";
const BARE = "bare kafkajs eachBatch";
const LARGE_BATCHES = "Sluice, unlimited rows + bytes, gRPC, max_rows_per_batch 1,000";
const LARGE_BATCH_ROWS = 1000;

type Variant = typeof UNTHROTTLED | typeof GRPC | typeof EMBEDDED;

export const runtimeOverhead: BenchGroup = {
  id: "runtime",
  title: "3. Runtime overhead: messages/s through a pipeline, memory log and real Kafka",
  async run(g) {
    const controller = BenchChild.start("controller-process.ts", { mode: "sluice", spec: pipelineSpec("bench-controller", null) });
    const ready = await controller.waitForType("ready", 30_000);
    const address = String(ready["address"]);
    try {
      await g.inTurn([() => measureMemory(g, address), () => measureKafka(g, address)]);
    } finally {
      await controller.stop();
    }
  },
};

function pipelineSpec(name: string, brokers: readonly string[] | null, topic = "input", maxRowsPerBatch = MAX_ROWS_PER_BATCH): Record<string, unknown> {
  return {
    pipeline: name,
    ...(brokers ? { kafka: { brokers, session_timeout: "10s" } } : {}),
    streams: { input: { topic, partitions: PARTITIONS } },
    computations: { Count: { module: NOOP_COMPUTATION, inputs: ["input"], max_rows_per_batch: maxRowsPerBatch } },
    dynamic_spec: {
      throttlers: { rows: {}, bytes: {} },
      computations: { Count: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } },
    },
  };
}

/** The same spec without the computation's throttlers (they stay declared, unused). */
function unthrottled(spec: Record<string, unknown>): Record<string, unknown> {
  return { ...spec, dynamic_spec: { throttlers: { rows: {}, bytes: {} }, computations: {} } };
}

async function runPipeline(config: { spec: Record<string, unknown>; controller: string; rows: number; prefill?: boolean }, timeoutMs: number): Promise<number> {
  const child = BenchChild.start("pipeline-process.ts", {
    spec: config.spec,
    controller: config.controller,
    finishAtRows: config.rows,
    ...(config.prefill
      ? {
          prefill: Array.from({ length: PARTITIONS }, (_, partition) => ({
            stream: "input",
            partition,
            count: Math.ceil(config.rows / PARTITIONS),
            firstTimestampMs: Date.now(),
            stepMs: 0,
          })),
        }
      : {}),
  });
  try {
    const started = await child.waitForType("started", 60_000);
    const finished = await child.waitForType("finished", timeoutMs);
    return (Number(finished["rows"]) * 1000) / (Number(finished["at"]) - Number(started["at"]));
  } finally {
    await child.stop();
  }
}

async function measureMemory(g: GroupContext, address: string): Promise<void> {
  const reps = g.pick(7, 1);
  // A second or more per run: with fewer rows the figure is mostly the prefetch pools' start (a
  // client's refills double from the first one), not the steady cost per message.
  const rows = g.pick(1_000_000, 8_000);
  const variants: Variant[] = [UNTHROTTLED, GRPC, EMBEDDED];
  const rates = new Map<Variant, number[]>();
  g.log(
    `memory log: ${reps} runs × ${variants.length} variants, ${rows.toLocaleString("en-US")} messages over ${PARTITIONS} partitions, max_rows_per_batch ${MAX_ROWS_PER_BATCH}`,
  );
  for (let rep = 0; rep < reps; rep++) {
    for (const variant of rotate(variants, rep)) {
      const spec = pipelineSpec(`bench-memory-${rep}`, null);
      const rate = await runPipeline(
        { spec: variant === UNTHROTTLED ? unthrottled(spec) : spec, controller: variant === GRPC ? address : "embedded", rows, prefill: true },
        120_000,
      );
      rates.set(variant, [...(rates.get(variant) ?? []), rate]);
      g.log(`run ${rep + 1} ${variant}: ${formatNumber(rate)} messages/s`);
    }
  }
  const note = `a worker process over the memory log (${PARTITIONS} partitions, max_rows_per_batch ${MAX_ROWS_PER_BATCH}); a computation that only counts; from worker.start() until the last message was processed`;
  g.add({
    id: "runtime.memory.unthrottled",
    label: "memory log, no throttler",
    unit: "messages/s",
    better: "higher",
    sluice: rates.get(UNTHROTTLED) ?? [],
    note,
  });
  g.add({
    id: "runtime.memory.grpc",
    label: "memory log, unlimited rows + bytes throttlers, controller over gRPC",
    unit: "messages/s",
    better: "higher",
    sluice: rates.get(GRPC) ?? [],
    peers: { [UNTHROTTLED]: rates.get(UNTHROTTLED) ?? [] },
  });
  g.add({
    id: "runtime.memory.embedded",
    label: "memory log, unlimited rows + bytes throttlers, embedded controller",
    unit: "messages/s",
    better: "higher",
    sluice: rates.get(EMBEDDED) ?? [],
    peers: { [UNTHROTTLED]: rates.get(UNTHROTTLED) ?? [] },
  });
}

async function measureKafka(g: GroupContext, address: string): Promise<void> {
  let broker: Broker;
  try {
    g.log("Kafka: finding or starting a broker (scripts/kafka.mjs)");
    broker = await ensureBroker();
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
    if (!g.quick) throw error;
    g.result.status = "partial";
    g.note(`SKIPPED the Kafka half of this group (quick mode only): no broker reachable and none could be started: ${reason}`);
    return;
  }
  try {
    const reps = g.pick(3, 1);
    // Long enough that the fetch pipeline's and the prefetch pools' start are a small share of the timed window.
    const rows = g.pick(1_000_000, 3_000);
    const topic = `bench-${randomUUID().slice(0, 8)}`;
    g.log(`Kafka ${broker.brokers.join(",")}: topic ${topic}, ${PARTITIONS} partitions, producing ${rows.toLocaleString("en-US")} messages`);
    await createTopic(broker.brokers, topic, PARTITIONS);
    await produce(broker.brokers, topic, rows, PARTITIONS);
    const subjects = [BARE, UNTHROTTLED, GRPC, LARGE_BATCHES] as const;
    const rates = new Map<string, number[]>();
    for (let rep = 0; rep < reps; rep++) {
      for (const subject of rotate(subjects, rep)) {
        const name = `bench-kafka-${randomUUID().slice(0, 8)}`;
        let rate: number;
        if (subject === BARE) {
          const child = BenchChild.start("kafka-bare-consumer.ts", { brokers: broker.brokers, topic, groupId: name, partitions: PARTITIONS, rows });
          try {
            const joined = await child.waitForType("joined", 60_000);
            const finished = await child.waitForType("finished", 180_000);
            rate = (rows * 1000) / (Number(finished["at"]) - Number(joined["at"]));
          } finally {
            await child.stop();
          }
        } else {
          const spec = pipelineSpec(name, broker.brokers, topic, subject === LARGE_BATCHES ? LARGE_BATCH_ROWS : MAX_ROWS_PER_BATCH);
          rate = await runPipeline(
            { spec: subject === UNTHROTTLED ? unthrottled(spec) : spec, controller: subject === UNTHROTTLED ? "embedded" : address, rows },
            180_000,
          );
        }
        rates.set(subject, [...(rates.get(subject) ?? []), rate]);
        g.log(`run ${rep + 1} ${subject}: ${formatNumber(rate)} messages/s`);
      }
    }
    const note = `one topic of ${rows.toLocaleString("en-US")} JSON messages over ${PARTITIONS} partitions read by a fresh consumer group each run, timed from the group join to the last message; Sluice: max_rows_per_batch ${MAX_ROWS_PER_BATCH}, a commit asked for after each iteration, sent merged and asynchronously; kafkajs: commits after each fetched batch`;
    const throttled = g.add({
      id: "runtime.kafka.grpc",
      label: "Kafka, unlimited rows + bytes throttlers, controller over gRPC",
      unit: "messages/s",
      better: "higher",
      sluice: rates.get(GRPC) ?? [],
      peers: { [BARE]: rates.get(BARE) ?? [], [UNTHROTTLED]: rates.get(UNTHROTTLED) ?? [], [LARGE_BATCHES]: rates.get(LARGE_BATCHES) ?? [] },
      note: `${note}; the max_rows_per_batch 1,000 row shows what is paid per iteration rather than per message`,
    });
    g.add({
      id: "runtime.kafka.unthrottled",
      label: "Kafka, no throttler",
      unit: "messages/s",
      better: "higher",
      sluice: rates.get(UNTHROTTLED) ?? [],
      peers: { [BARE]: rates.get(BARE) ?? [] },
    });
    const ratio = throttled.peers[BARE]?.ratio;
    g.goal({
      id: "runtime.kafka.ratio",
      text: "Sluice ≥ 0.9 × bare kafkajs (throttling on, unlimited)",
      figure: throttled,
      value: ratio?.median ?? null,
      target: 0.9,
      compare: ">=",
      describe: ratio ? `×${formatNumber(ratio.median)} (runs ${ratio.runs.map((r) => formatNumber(r)).join(", ")})` : "not measured",
    });
  } finally {
    await broker.stop();
  }
}

function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
