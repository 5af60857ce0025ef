// services: kafka
// rewind() sends a partition back to its last committed offset once the handler returns: to the
// offset committed through this lease, or to the earliest offset when nothing was ever committed.
// A handler that throws is rewound the same way. Nothing is lost; only the rewound records repeat.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { SinkRecord } from "@sluice/runtime";
import { KafkaIoFactory, isKafkaIoError, type KafkaIoError } from "../src/index.ts";
import { committedOffsets, endOffsets, pipelineSpec, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const PARTITIONS = 3;
const PER_PARTITION = 200;
const encoder = new TextEncoder();

const broker = useBroker();

interface Delivery {
  readonly partition: number;
  readonly offsets: readonly string[];
}

test("rewind() redelivers from the last commit (or the earliest offset), a throwing handler is rewound, nothing is lost", { timeout: 60_000 }, async (t) => {
  const topic = uniqueName("sluice-rewind");
  const spec = pipelineSpec({
    pipeline: uniqueName("rewind"),
    brokers: broker.brokers,
    streams: { events: { topic, partitions: PARTITIONS } },
    computations: { Replay: { inputs: ["events"] } },
  });
  const errors: KafkaIoError[] = [];
  const factory = new KafkaIoFactory(spec, {
    logLevel: "nothing",
    // Small producer requests and fetches, so that each partition arrives in several batches.
    sink: { maxRequestBytes: 1_024 },
    source: { maxBytesPerPartition: 2_048, heartbeatIntervalMs: 1_000, onError: (error) => errors.push(error) },
  });
  broker.cleanup.push(["factory.close", () => factory.close()], ["deleteTopics", () => broker.admin.deleteTopics({ topics: [topic], timeout: 10_000 })]);
  await factory.ensureTopics();

  const sink = factory.createSink(spec);
  const records: SinkRecord[] = [];
  for (let partition = 0; partition < PARTITIONS; partition++) {
    for (let i = 0; i < PER_PARTITION; i++) records.push({ key: null, value: encoder.encode(`p${partition}-${i}`), partition });
  }
  await withTimeout(sink.send("events", records), 20_000, () => "send");

  const deliveries: Delivery[] = [];
  const seen = new Map<number, Set<string>>();
  let committedMidway: string | undefined;
  const source = factory.createSource("Replay", spec.computations["Replay"]!, spec);
  const t0 = Date.now();
  await withTimeout(
    source.start(async (batch, context) => {
      const offsets = batch.records.map((r) => r.offset);
      const first = deliveries.filter((d) => d.partition === batch.partition).length === 0;
      deliveries.push({ partition: batch.partition, offsets });
      const set = seen.get(batch.partition) ?? new Set<string>();
      seen.set(batch.partition, set);
      offsets.forEach((o) => set.add(o));
      const last = offsets[offsets.length - 1]!;
      if (first && batch.partition === 0) {
        // Half the batch is done and committed, then the rest fails.
        committedMidway = offsets[Math.floor(offsets.length / 2)]!;
        await context.commit(committedMidway);
        context.rewind();
        return;
      }
      if (first && batch.partition === 1) {
        context.rewind(); // nothing committed yet: back to the earliest offset
        return;
      }
      if (first && batch.partition === 2) throw new Error("simulated failure of the first batch of partition 2");
      await context.commit((BigInt(last) + 1n).toString());
    }),
    30_000,
    () => "source.start",
  );

  const complete = () => [0, 1, 2].every((p) => (seen.get(p)?.size ?? 0) === PER_PARTITION);
  await waitFor(complete, 40_000, () => `all offsets seen: ${[0, 1, 2].map((p) => seen.get(p)?.size ?? 0).join("/")} of ${PER_PARTITION} each`);
  const ends = await endOffsets(broker.admin, topic);
  // The last commit is awaited inside the handler; give it the moment it needs to land.
  let committed = await committedOffsets(broker.admin, source.groupId, topic);
  const deadline = Date.now() + 10_000;
  while ([...ends].some(([p, end]) => committed.get(p) !== end) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    committed = await committedOffsets(broker.admin, source.groupId, topic);
  }
  assert.deepEqual(committed, ends, "committed offsets = end offsets");
  const elapsed = Date.now() - t0;

  const byPartition = (p: number) => deliveries.filter((d) => d.partition === p);
  const [p0first, p0second] = byPartition(0);
  assert.ok(p0first && p0second && committedMidway !== undefined);
  assert.equal(p0first.offsets[0], "0");
  assert.equal(p0second.offsets[0], committedMidway, "partition 0 resumes at the offset committed before rewind()");

  const [p1first, p1second] = byPartition(1);
  assert.ok(p1first && p1second);
  assert.equal(p1second.offsets[0], "0", "partition 1 (never committed) goes back to the earliest offset");
  assert.deepEqual(p1second.offsets.slice(0, p1first.offsets.length), p1first.offsets);

  const [p2first, p2second] = byPartition(2);
  assert.ok(p2first && p2second);
  assert.equal(p2second.offsets[0], "0", "a throwing handler rewinds its partition");
  assert.equal(errors.length, 1);
  assert.ok(isKafkaIoError(errors[0], "HANDLER_FAILED"), String(errors[0]));
  assert.match(errors[0]!.message, /simulated failure.*goes back to offset 0/);

  // Within each partition the deliveries after a rewind continue in order, without gaps.
  for (let p = 0; p < PARTITIONS; p++) {
    const [, ...rest] = byPartition(p);
    const flat = rest.flatMap((d) => d.offsets);
    const start = Number(flat[0]);
    flat.forEach((o, i) => assert.equal(o, String(start + i), `partition ${p}: delivery after the rewind in order`));
    assert.equal(flat[flat.length - 1], String(PER_PARTITION - 1));
  }

  const total = deliveries.reduce((n, d) => n + d.offsets.length, 0);
  const duplicates = total - PARTITIONS * PER_PARTITION;
  const expectedDuplicates = p0first.offsets.length - Number(committedMidway) + p1first.offsets.length + p2first.offsets.length;
  assert.equal(duplicates, expectedDuplicates, "only the rewound records repeat");
  await withTimeout(source.close(), 30_000, () => "source.close");
  t.diagnostic(
    `${deliveries.length} batches, ${total} deliveries for ${PARTITIONS * PER_PARTITION} records; ${duplicates} repeated = ` +
      `p0 ${p0first.offsets.length - Number(committedMidway)} (after the commit at ${committedMidway}) + p1 ${p1first.offsets.length} + p2 ${p2first.offsets.length}; ${elapsed} ms`,
  );
});
