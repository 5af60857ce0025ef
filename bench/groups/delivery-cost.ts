// Group 6: what delivery "exactly_once" (docs/design.md §13) costs against "at_least_once" on a real
// broker. The same worker process relays every message of a topic to an output topic; only the
// computation's `delivery` differs. With exactly_once each iteration is one Kafka transaction
// (AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn: about five round trips,
// and the job waits for them before its next iteration on that partition), so the cost is paid per
// iteration: it is measured at two batch sizes. No throttler: only the delivery's cost shows.
import { randomUUID } from "node:crypto";
import { BenchChild } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup, GroupContext } from "../lib/group.ts";
import { createTopic, ensureBroker, produce, type Broker } from "../lib/kafka.ts";
import { NOOP_COMPUTATION } from "../lib/specs.ts";

const PARTITIONS = 4;
const BATCH_SIZES = [100, 1000] as const;
const AT_LEAST_ONCE = "at_least_once";
const EXACTLY_ONCE = "exactly_once";
type Delivery = typeof AT_LEAST_ONCE | typeof EXACTLY_ONCE;

export const deliveryCost: BenchGroup = {
  id: "delivery",
  title: "6. Delivery: exactly_once against at_least_once, messages/s relayed through real Kafka",
  async run(g) {
    let broker: Broker;
    try {
      g.log("Kafka: finding or starting a broker (scripts/kafka.mjs)");
      broker = await ensureBroker();
    } catch (error) {
      const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
      if (!g.quick) throw error;
      g.result.status = "partial";
      g.note(`SKIPPED this group (quick mode only): no broker reachable and none could be started: ${reason}`);
      // A figure without runs, so that the group still reports what it would have measured.
      g.add({ id: "delivery.kafka.skipped", label: "exactly_once vs at_least_once (skipped: no broker)", unit: "messages/s", better: "higher", sluice: null });
      return;
    }
    try {
      await measure(g, broker);
    } finally {
      await broker.stop();
    }
  },
};

function relaySpec(
  name: string,
  brokers: readonly string[],
  input: string,
  output: string,
  delivery: Delivery,
  maxRowsPerBatch: number,
): Record<string, unknown> {
  return {
    pipeline: name,
    kafka: { brokers, session_timeout: "10s" },
    streams: { input: { topic: input, partitions: PARTITIONS }, out: { topic: output, partitions: PARTITIONS } },
    computations: { Relay: { module: NOOP_COMPUTATION, inputs: ["input"], outputs: ["out"], max_rows_per_batch: maxRowsPerBatch, delivery } },
    dynamic_spec: { throttlers: {}, computations: {} },
  };
}

/** Messages/s from worker.start() until the computation saw the last input (its last iteration's commit is not waited for). */
async function relay(spec: Record<string, unknown>, rows: number): Promise<number> {
  const child = BenchChild.start("pipeline-process.ts", { spec, controller: "embedded", finishAtRows: rows, relayToOutputs: true });
  try {
    const started = await child.waitForType("started", 60_000);
    const finished = await child.waitForType("finished", 300_000);
    return (Number(finished["rows"]) * 1000) / (Number(finished["at"]) - Number(started["at"]));
  } finally {
    await child.stop();
  }
}

async function measure(g: GroupContext, broker: Broker): Promise<void> {
  const reps = g.pick(3, 1);
  const rows = g.pick(50_000, 1_500);
  const input = `bench-delivery-${randomUUID().slice(0, 8)}`;
  g.log(`Kafka ${broker.brokers.join(",")}: topic ${input}, ${PARTITIONS} partitions, producing ${rows.toLocaleString("en-US")} messages`);
  await createTopic(broker.brokers, input, PARTITIONS);
  await produce(broker.brokers, input, rows, PARTITIONS);
  const subjects = BATCH_SIZES.flatMap((batch) => [AT_LEAST_ONCE, EXACTLY_ONCE].map((delivery) => ({ batch, delivery: delivery as Delivery })));
  const rates = new Map<string, number[]>();
  const key = (s: { batch: number; delivery: Delivery }) => `${s.delivery}/${s.batch}`;
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of rotate(subjects, rep)) {
      const name = `bench-delivery-${randomUUID().slice(0, 8)}`;
      const output = `${name}-out`;
      await createTopic(broker.brokers, output, PARTITIONS);
      const rate = await relay(relaySpec(name, broker.brokers, input, output, subject.delivery, subject.batch), rows);
      rates.set(key(subject), [...(rates.get(key(subject)) ?? []), rate]);
      g.log(`run ${rep + 1} ${subject.delivery}, max_rows_per_batch ${subject.batch}: ${formatNumber(rate)} messages/s`);
    }
  }
  const note =
    `one worker process, embedded controller, no throttler; a fresh consumer group and output topic each run; ${rows.toLocaleString("en-US")} JSON messages over ` +
    `${PARTITIONS} partitions relayed one to one; timed from worker.start() (exactly_once: the partitions' transactional ids are claimed in it) to the last input seen`;
  for (const batch of BATCH_SIZES) {
    const figure = g.add({
      id: `delivery.kafka.batch${batch}`,
      label: `Kafka relay, max_rows_per_batch ${batch.toLocaleString("en-US")}: exactly_once`,
      unit: "messages/s",
      better: "higher",
      sluice: rates.get(`${EXACTLY_ONCE}/${batch}`) ?? [],
      peers: { [`${AT_LEAST_ONCE} (same worker, same spec)`]: rates.get(`${AT_LEAST_ONCE}/${batch}`) ?? [] },
      note,
    });
    const ratio = Object.values(figure.peers)[0]?.ratio;
    if (ratio) g.log(`max_rows_per_batch ${batch}: exactly_once ÷ at_least_once ×${formatNumber(ratio.median)}`);
  }
}

function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
