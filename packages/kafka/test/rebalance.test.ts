// services: kafka
// Two workers (two KafkaIoFactory instances, as two processes would have) run the source of the
// same computation, so one consumer group. The second one joining splits the partitions; the first
// one closing hands its partitions to the second, which finishes the stream. No record is lost;
// a record is delivered twice only when it had been delivered but not committed before.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { BatchHandler, PartitionRef, SinkRecord } from "@sluice/runtime";
import { KafkaIoFactory, isKafkaIoError, type KafkaSource } from "../src/index.ts";
import { committedOffsets, endOffsets, pipelineSpec, sleep, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const PARTITIONS = 3;
const COUNT = 3_000;
/** Handler time per record: slow enough that the stream outlasts two rebalances. */
const MS_PER_RECORD = 5;
const encoder = new TextEncoder();

const broker = useBroker();

interface Worker {
  readonly name: string;
  /** Per partition owned now: the offset its next batch must start at (unknown right after an assignment). */
  readonly expected: Map<number, bigint | undefined>;
  readonly source: KafkaSource;
  readonly assigned: PartitionRef[][];
  readonly revoked: PartitionRef[][];
  delivered: number;
  readonly owned: () => number[];
}

test("two sources in one group split the partitions; when one closes the other takes over; nothing is lost", { timeout: 60_000 }, async (t) => {
  const topic = uniqueName("sluice-rebalance");
  const spec = pipelineSpec({
    pipeline: uniqueName("rebalance"),
    brokers: broker.brokers,
    streams: { events: { topic, partitions: PARTITIONS } },
    computations: { Slow: { inputs: ["events"] } },
  });
  const options = {
    logLevel: "nothing",
    sink: { maxRequestBytes: 512 },
    source: { maxBytesPerPartition: 1_024, heartbeatIntervalMs: 500, sessionTimeoutMs: 10_000, rebalanceTimeoutMs: 5_000 },
  } as const;
  const factoryA = new KafkaIoFactory(spec, options);
  const factoryB = new KafkaIoFactory(spec, options);
  broker.cleanup.push(
    ["factoryA.close", () => factoryA.close()],
    ["factoryB.close", () => factoryB.close()],
    ["deleteTopics", () => broker.admin.deleteTopics({ topics: [topic], timeout: 10_000 })],
  );
  await factoryA.ensureTopics();
  const records: SinkRecord[] = Array.from({ length: COUNT }, (_, i) => ({ key: null, value: encoder.encode(String(i)), partition: i % PARTITIONS }));
  await withTimeout(factoryA.createSink(spec).send("events", records), 20_000, () => "send");

  // Shared bookkeeping of both workers.
  const seen = new Map<string, number>(); // "partition:offset" → deliveries
  const committed = new Map<number, bigint>(); // highest successful commit per partition
  let duplicates = 0;
  let refusedCommits = 0;
  const violations: string[] = [];

  const handlerOf =
    (worker: () => Worker): BatchHandler =>
    async (batch, context) => {
      const w = worker();
      const firstOffset = BigInt(batch.records[0]!.offset);
      const expected = w.expected.get(batch.partition);
      if (!w.expected.has(batch.partition)) violations.push(`${w.name}: batch of partition ${batch.partition} it does not own`);
      // Within one ownership batches continue exactly where the previous one ended, across rejoins that kept the partition.
      if (expected !== undefined && firstOffset !== expected)
        violations.push(`${w.name}: partition ${batch.partition} batch starts at ${firstOffset}, expected ${expected}`);
      w.expected.set(batch.partition, BigInt(batch.records[batch.records.length - 1]!.offset) + 1n);
      for (const record of batch.records) {
        const key = `${batch.partition}:${record.offset}`;
        const before = seen.get(key) ?? 0;
        if (before > 0) {
          duplicates++;
          // A repeat is fine only for a record whose commit never happened.
          const floor = committed.get(batch.partition) ?? 0n;
          if (BigInt(record.offset) < floor) violations.push(`${w.name}: ${key} delivered again after offset ${floor} was committed`);
        }
        seen.set(key, before + 1);
      }
      w.delivered += batch.records.length;
      await sleep(MS_PER_RECORD * batch.records.length, context.signal);
      // A handler that ignores its aborted signal and commits anyway must be refused: the partition
      // may already be processed by its next owner.
      const revokedBefore = context.signal.aborted;
      const next = BigInt(batch.records[batch.records.length - 1]!.offset) + 1n;
      try {
        await context.commit(next.toString());
        if (revokedBefore) violations.push(`${w.name}: commit of ${batch.partition}@${next} accepted after revocation`);
        else if (next > (committed.get(batch.partition) ?? 0n)) committed.set(batch.partition, next);
      } catch (error) {
        if (!isKafkaIoError(error, "PARTITION_REVOKED")) throw error;
        if (!context.signal.aborted) violations.push(`${w.name}: commit refused although the signal was not aborted`);
        refusedCommits++;
      }
    };

  const makeWorker = (name: string, factory: KafkaIoFactory): Worker => {
    const assigned: PartitionRef[][] = [];
    const revoked: PartitionRef[][] = [];
    const source = factory.createSource("Slow", spec.computations["Slow"]!, spec);
    return {
      name,
      expected: new Map(),
      source,
      assigned,
      revoked,
      delivered: 0,
      owned: () =>
        source
          .assignment()
          .map((r) => r.partition)
          .sort(),
    };
  };
  const a = makeWorker("A", factoryA);
  const b = makeWorker("B", factoryB);
  const listen = (w: Worker) => ({
    onAssigned: (refs: readonly PartitionRef[]) => {
      w.assigned.push([...refs]);
      for (const { partition } of refs) if (!w.expected.has(partition)) w.expected.set(partition, undefined);
    },
    onRevoked: (refs: readonly PartitionRef[]) => {
      w.revoked.push([...refs]);
      for (const { partition } of refs) w.expected.delete(partition);
    },
  });

  const t0 = Date.now();
  await withTimeout(
    a.source.start(
      handlerOf(() => a),
      listen(a),
    ),
    30_000,
    () => "A start",
  );
  assert.deepEqual(a.owned(), [0, 1, 2], "A alone owns every partition");
  await waitFor(
    () => a.delivered >= 200,
    20_000,
    () => `A delivering (${a.delivered})`,
  );
  const tSplit0 = Date.now();

  await withTimeout(
    b.source.start(
      handlerOf(() => b),
      listen(b),
    ),
    30_000,
    () => "B start",
  );
  await waitFor(
    () => a.revoked.length > 0 && a.assigned.length >= 2,
    20_000,
    () => `A rejoined after B joined (assigned ${JSON.stringify(a.assigned)})`,
  );
  const tSplit = Date.now();
  const split = { a: a.owned(), b: b.owned() };
  assert.ok(split.b.length > 0 && split.a.length > 0, `both own partitions: ${JSON.stringify(split)}`);
  assert.deepEqual([...split.a, ...split.b].sort(), [0, 1, 2], `the partitions are split without overlap: ${JSON.stringify(split)}`);
  assert.deepEqual(
    a.revoked
      .flat()
      .map((r) => r.partition)
      .sort(),
    split.b,
    "A was told which partitions it lost",
  );
  const remainingAtSplit = COUNT - seen.size;
  await waitFor(
    () => b.delivered > 0,
    20_000,
    () => "B delivering",
  );
  // A keeps working on the partitions it kept, continuing where it was (checked in the handler).
  const aAtSplit = a.delivered;
  await waitFor(
    () => a.delivered > aAtSplit,
    20_000,
    () => "A delivering after the split",
  );

  const tHandOver0 = Date.now();
  await withTimeout(a.source.close(), 30_000, () => "A close");
  await waitFor(
    () => b.owned().length === PARTITIONS,
    20_000,
    () => `B owns every partition (owns ${JSON.stringify(b.owned())})`,
  );
  const tHandOver = Date.now();
  assert.deepEqual(
    b.assigned[b.assigned.length - 1]!.map((r) => r.partition),
    [0, 1, 2],
    "B's last onAssigned lists every partition",
  );
  const remainingAtHandOver = COUNT - seen.size;

  await waitFor(
    () => seen.size === COUNT,
    40_000,
    () => `${seen.size} of ${COUNT} records delivered`,
  );
  const ends = await endOffsets(broker.admin, topic);
  await waitFor(
    () => [...ends].every(([p, end]) => committed.get(p) === BigInt(end)),
    20_000,
    () => `commits at the end offsets (${JSON.stringify([...committed])})`,
  );
  const tDone = Date.now();
  assert.deepEqual(await committedOffsets(broker.admin, b.source.groupId, topic), ends, "the group's committed offsets = end offsets");
  assert.deepEqual(violations, []);
  assert.ok(refusedCommits > 0, "handlers in flight on lost partitions had their commits refused");
  assert.ok(remainingAtSplit > 0 && remainingAtHandOver > 0, `work was left at both rebalances (${remainingAtSplit}, ${remainingAtHandOver})`);

  await withTimeout(b.source.close(), 30_000, () => "B close");
  t.diagnostic(
    `split after ${tSplit0 - t0} ms: B join + A rejoin ${tSplit - tSplit0} ms (A ${JSON.stringify(split.a)}, B ${JSON.stringify(split.b)}, ${remainingAtSplit} records left); ` +
      `A close → B owns all ${tHandOver - tHandOver0} ms (${remainingAtHandOver} left); done ${tDone - t0} ms; ` +
      `deliveries A ${a.delivered} + B ${b.delivered} = ${a.delivered + b.delivered} for ${COUNT} records: ${duplicates} duplicates (all uncommitted when redelivered), ` +
      `${refusedCommits} late commits refused after revocation; A assigned ${JSON.stringify(a.assigned.map((r) => r.map((x) => x.partition)))} revoked ${JSON.stringify(a.revoked.map((r) => r.map((x) => x.partition)))}, ` +
      `B assigned ${JSON.stringify(b.assigned.map((r) => r.map((x) => x.partition)))} revoked ${JSON.stringify(b.revoked.map((r) => r.map((x) => x.partition)))}`,
  );
});
