// services: kafka
// A handler that waits 8 s in the middle of a batch (a throttled iteration) with a 6 s session
// timeout: the member stays in the group (no rejoin, no revocation, its commit is accepted), and the
// other partitions keep flowing meanwhile instead of waiting for the slow one.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { PartitionRef, SinkRecord } from "@sluice/runtime";
import { KafkaIoFactory } from "../src/index.ts";
import { committedOffsets, endOffsets, pipelineSpec, sleep, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const PARTITIONS = 3;
const PER_PARTITION = 300;
const WAIT_MS = 8_000;
const SESSION_TIMEOUT_MS = 6_000;
const encoder = new TextEncoder();

const broker = useBroker();

test(`a handler waiting ${WAIT_MS / 1000} s with a ${SESSION_TIMEOUT_MS / 1000} s session timeout keeps its membership; other partitions keep flowing`, {
  timeout: 60_000,
}, async (t) => {
  const topic = uniqueName("sluice-slow");
  const spec = pipelineSpec({
    pipeline: uniqueName("slow"),
    brokers: broker.brokers,
    streams: { events: { topic, partitions: PARTITIONS } },
    computations: { Throttled: { inputs: ["events"] } },
  });
  const factory = new KafkaIoFactory(spec, {
    logLevel: "nothing",
    sink: { maxRequestBytes: 1_024 },
    source: { sessionTimeoutMs: SESSION_TIMEOUT_MS, heartbeatIntervalMs: 1_000, rebalanceTimeoutMs: 5_000, maxBytesPerPartition: 2_048 },
  });
  broker.cleanup.push(["factory.close", () => factory.close()], ["deleteTopics", () => broker.admin.deleteTopics({ topics: [topic], timeout: 10_000 })]);
  await factory.ensureTopics();
  const records: SinkRecord[] = Array.from({ length: PARTITIONS * PER_PARTITION }, (_, i) => ({
    key: null,
    value: encoder.encode(`v${i}`),
    partition: i % PARTITIONS,
  }));
  await withTimeout(factory.createSink(spec).send("events", records), 20_000, () => "send");

  const assigned: PartitionRef[][] = [];
  const revoked: PartitionRef[][] = [];
  const delivered = new Map<number, number>();
  let slowStartedAt = 0;
  let slowEndedAt = 0;
  let abortedDuringWait = false;
  let othersDoneAt = 0;
  let slowCommitError: unknown = null;
  const source = factory.createSource("Throttled", spec.computations["Throttled"]!, spec);
  await withTimeout(
    source.start(
      async (batch, context) => {
        const first = batch.records[0]!;
        const last = batch.records[batch.records.length - 1]!;
        const half = Math.floor(batch.records.length / 2);
        if (batch.partition === 0 && first.offset === "0") {
          // First half processed and committed, then a long wait for quota before the second half.
          await context.commit(batch.records[half]!.offset);
          slowStartedAt = Date.now();
          await sleep(WAIT_MS, context.signal);
          slowEndedAt = Date.now();
          abortedDuringWait = context.signal.aborted;
          try {
            await context.commit((BigInt(last.offset) + 1n).toString());
          } catch (error) {
            slowCommitError = error;
          }
        } else {
          await context.commit((BigInt(last.offset) + 1n).toString());
        }
        delivered.set(batch.partition, (delivered.get(batch.partition) ?? 0) + batch.records.length);
        if (othersDoneAt === 0 && delivered.get(1) === PER_PARTITION && delivered.get(2) === PER_PARTITION) othersDoneAt = Date.now();
      },
      { onAssigned: (refs) => assigned.push([...refs]), onRevoked: (refs) => revoked.push([...refs]) },
    ),
    30_000,
    () => "source.start",
  );

  const total = () => [...delivered.values()].reduce((a, b) => a + b, 0);
  await waitFor(
    () => total() === PARTITIONS * PER_PARTITION,
    40_000,
    () => `${total()} of ${PARTITIONS * PER_PARTITION} delivered`,
  );
  const ends = await endOffsets(broker.admin, topic);
  const committed = await committedOffsets(broker.admin, source.groupId, topic);

  assert.ok(slowEndedAt - slowStartedAt >= WAIT_MS - 50, `the handler waited ${slowEndedAt - slowStartedAt} ms`);
  assert.equal(abortedDuringWait, false, "the partition was not revoked during the wait");
  assert.equal(slowCommitError, null, `the commit after the wait was accepted: ${String(slowCommitError)}`);
  assert.equal(assigned.length, 1, `one join only (no expulsion and rejoin): ${JSON.stringify(assigned)}`);
  assert.deepEqual(revoked, []);
  assert.ok(othersDoneAt > 0 && othersDoneAt < slowEndedAt, "partitions 1 and 2 finished while partition 0 waited");
  assert.deepEqual(committed, ends, "committed offsets = end offsets");
  assert.equal(total(), PARTITIONS * PER_PARTITION, "each record once");

  const revocationsBeforeClose = revoked.length;
  await withTimeout(source.close(), 30_000, () => "source.close");
  t.diagnostic(
    `partition 0 waited ${slowEndedAt - slowStartedAt} ms (session timeout ${SESSION_TIMEOUT_MS} ms) without losing the group; ` +
      `partitions 1 and 2 (${PER_PARTITION} records each) were done ${othersDoneAt - slowStartedAt} ms into that wait; joins ${assigned.length}, revocations ${revocationsBeforeClose}`,
  );
});
