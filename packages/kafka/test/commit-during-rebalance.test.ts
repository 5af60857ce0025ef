// services: kafka
// A commit the broker answers with REBALANCE_IN_PROGRESS (injected here, since the real window is a
// few milliseconds wide) waits for the group's next join: if this member kept the partition the
// commit goes through in the new generation, otherwise it is refused as PARTITION_REVOKED.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Consumer, ConsumerConfig, Kafka } from "kafkajs";
import type { PartitionRef, SinkRecord } from "@sluice/runtime";
import { KafkaIoFactory, KafkaSource, isKafkaIoError } from "../src/index.ts";
import { committedOffsets, pipelineSpec, sleep, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const encoder = new TextEncoder();

const broker = useBroker();

interface Outcome {
  readonly partition: number;
  readonly offset: string;
  readonly result: "committed" | "revoked";
  readonly aborted: boolean;
}

/** A kafkajs client whose consumers fail the next commit once, as the broker does mid-rebalance. */
function failingOnce(kafka: Kafka, armed: { fail: boolean; failures: number }): Kafka {
  const consumer = (config: ConsumerConfig): Consumer =>
    new Proxy(kafka.consumer(config), {
      get(target, property, receiver) {
        if (property !== "commitOffsets") return Reflect.get(target, property, receiver) as unknown;
        return async (offsets: Parameters<Consumer["commitOffsets"]>[0]) => {
          if (armed.fail) {
            armed.fail = false;
            armed.failures++;
            throw Object.assign(new Error("The group is rebalancing, so a rejoin is needed"), { type: "REBALANCE_IN_PROGRESS" });
          }
          return target.commitOffsets(offsets);
        };
      },
    });
  // Only consumer() is used by KafkaSource; the rest of the client is the real one.
  return Object.assign(Object.create(kafka) as Kafka, { consumer });
}

test("a commit refused by a rebalance is retried after the next join, or refused if the partition moved", { timeout: 60_000 }, async (t) => {
  const topic = uniqueName("sluice-commit-rebalance");
  const spec = pipelineSpec({
    pipeline: uniqueName("commit-rebalance"),
    brokers: broker.brokers,
    streams: { events: { topic, partitions: 2 } },
    computations: { C: { inputs: ["events"] } },
  });
  const options = { logLevel: "nothing", source: { heartbeatIntervalMs: 500, sessionTimeoutMs: 10_000, rebalanceTimeoutMs: 5_000 } } as const;
  const factory = new KafkaIoFactory(spec, options);
  const other = new KafkaIoFactory(spec, options);
  broker.cleanup.push(
    ["factory.close", () => factory.close()],
    ["other.close", () => other.close()],
    ["deleteTopics", () => broker.admin.deleteTopics({ topics: [topic], timeout: 10_000 })],
  );
  await factory.ensureTopics();
  const records: SinkRecord[] = Array.from({ length: 200 }, (_, i) => ({ key: null, value: encoder.encode(String(i)), partition: i % 2 }));
  await withTimeout(factory.createSink(spec).send("events", records), 20_000, () => "send");

  const armed = { fail: false, failures: 0 };
  const source = new KafkaSource({ kafka: failingOnce(factory.kafka, armed), pipeline: spec, computation: "C" }, options.source);
  broker.cleanup.push(["source.close", () => source.close()]);
  const second = other.createSource("C", spec.computations["C"]!, spec);
  const assigned: PartitionRef[][] = [];
  // Written by the handler; a holder, so that control-flow narrowing does not pin it to null here.
  const seen: { outcome: Outcome | null; joinedSecond: Promise<void> | null } = { outcome: null, joinedSecond: null };

  const t0 = Date.now();
  await withTimeout(
    source.start(
      async (batch, context) => {
        const offset = (BigInt(batch.records[batch.records.length - 1]!.offset) + 1n).toString();
        if (seen.outcome !== null || seen.joinedSecond !== null) {
          if (!context.signal.aborted) await context.commit(offset).catch(() => undefined);
          return;
        }
        // Mid-batch a second member joins; this commit meets the rebalance.
        armed.fail = true;
        seen.joinedSecond = second.start(async (_batch, ctx) => {
          await sleep(10, ctx.signal);
        });
        try {
          await context.commit(offset);
          seen.outcome = { partition: batch.partition, offset, result: "committed", aborted: context.signal.aborted };
        } catch (error) {
          assert.ok(isKafkaIoError(error, "PARTITION_REVOKED"), String(error));
          seen.outcome = { partition: batch.partition, offset, result: "revoked", aborted: context.signal.aborted };
        }
      },
      { onAssigned: (refs) => assigned.push([...refs]) },
    ),
    30_000,
    () => "source.start",
  );
  await waitFor(
    () => seen.outcome !== null,
    30_000,
    () => "the commit that met the rebalance to settle",
  );
  await withTimeout(seen.joinedSecond ?? Promise.resolve(), 30_000, () => "second source start");
  const elapsed = Date.now() - t0;
  const settled = seen.outcome;
  assert.ok(settled);
  assert.equal(armed.failures, 1);
  assert.ok(assigned.length >= 2, `the source joined again after the second member came: ${JSON.stringify(assigned)}`);
  const keeps = assigned[1]!.some((r) => r.partition === settled.partition);
  const committed = await committedOffsets(broker.admin, source.groupId, topic);
  if (keeps) {
    assert.equal(settled.result, "committed", "the partition stayed: the commit went through in the new generation");
    assert.equal(committed.get(settled.partition), settled.offset);
  } else {
    assert.equal(settled.result, "revoked", "the partition moved: the commit is refused");
    assert.equal(settled.aborted, true);
  }
  await withTimeout(source.close(), 30_000, () => "source.close");
  await withTimeout(second.close(), 30_000, () => "second.close");
  t.diagnostic(`partition ${settled.partition} ${keeps ? "kept" : "moved"}: commit ${settled.result} ${elapsed} ms after start`);
});
