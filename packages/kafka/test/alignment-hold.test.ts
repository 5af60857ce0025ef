// PartitionDelivery's side of watermark alignment (docs/design.md §12) with recorded partition moves in
// place of kafkajs: a job's hold pauses its partition, the read window does not resume it while
// held, and letting go resumes it. The broker path is covered by test/kafka-watermark-alignment.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { EachBatchPayload, KafkaMessage } from "kafkajs";
import type { BatchContext } from "@sluice/runtime";
import { CommitCoalescer } from "../src/commit-coalescer.ts";
import { PartitionDelivery } from "../src/partition-delivery.ts";
import { PartitionLease, PartitionSlot } from "../src/partition-lease.ts";

function batchOf(offsets: number[]): Pick<EachBatchPayload, "batch" | "resolveOffset"> {
  // Only the fields the Kafka record reader reads; kafkajs's KafkaMessage is a union of two record formats.
  const messages = offsets.map(
    (o) => ({ key: null, value: Buffer.from("{}"), headers: {}, offset: String(o), timestamp: String(1_700_000_000_000 + o) }) as unknown as KafkaMessage,
  );
  const batch = { topic: "in", partition: 0, messages, lastOffset: () => String(offsets[offsets.length - 1]) } as unknown as EachBatchPayload["batch"];
  return { batch, resolveOffset: () => {} };
}

test("a held partition is paused and stays paused until the job lets go", async () => {
  const moves: string[] = [];
  let context: BatchContext | null = null;
  let letGo: () => void = () => {};
  const delivery = new PartitionDelivery({
    groupId: "g",
    prefetchBatchesPerPartition: 1,
    transactions: null,
    fencedReclaimDelayMs: 6000,
    commits: new CommitCoalescer({
      groupId: "g",
      send: async () => {},
      isGroupChange: () => false,
      waitForJoin: async () => {},
      joins: () => 1,
      intervalMs: 10,
      maxAttempts: 1,
    }),
    handler: () => async (_batch, ctx) => {
      context = ctx;
      if (moves.length === 0) {
        ctx.hold?.(true);
        await new Promise<void>((resolve) => (letGo = resolve));
        ctx.hold?.(false);
      }
    },
    onError: (error) => assert.fail(error.message),
    moves: { pause: () => moves.push("pause"), resume: () => moves.push("resume"), seek: () => moves.push("seek") },
  });
  const slot = new PartitionSlot("in", 0);
  const lease = new PartitionLease("input", "in", 0);
  slot.lease = lease;
  delivery.accept(slot, lease, batchOf([0, 1]));
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(context, "the handler runs");
  assert.deepEqual(moves, ["pause"], "held: paused");
  assert.equal(lease.heldByAlignment, true);
  delivery.accept(slot, lease, batchOf([2, 3])); // one batch already fetched may still arrive
  assert.equal(moves.includes("resume"), false, "queued, and not resumed while held");
  letGo();
  await slot.drained;
  assert.equal(lease.heldByAlignment, false);
  assert.equal(moves.includes("resume"), true, "resumed once let go and the window has room");
  assert.equal(moves.indexOf("resume") > moves.indexOf("pause"), true);
});

test("a hold from a revoked lease does nothing to the partition or its next owner", async () => {
  const moves: string[] = [];
  let context: BatchContext | null = null;
  const delivery = new PartitionDelivery({
    groupId: "g",
    prefetchBatchesPerPartition: 1,
    transactions: null,
    fencedReclaimDelayMs: 6000,
    commits: new CommitCoalescer({
      groupId: "g",
      send: async () => {},
      isGroupChange: () => false,
      waitForJoin: async () => {},
      joins: () => 1,
      intervalMs: 10,
      maxAttempts: 1,
    }),
    handler: () => async (_batch, ctx) => {
      context = ctx;
    },
    onError: () => {},
    moves: { pause: () => moves.push("pause"), resume: () => moves.push("resume"), seek: () => moves.push("seek") },
  });
  const slot = new PartitionSlot("in", 0);
  const old = new PartitionLease("input", "in", 0);
  slot.lease = old;
  delivery.accept(slot, old, batchOf([0]));
  await slot.drained;
  assert.ok(context);
  old.revoke(new Error("revoked"));
  const next = new PartitionLease("input", "in", 0);
  slot.lease = next;
  moves.length = 0;
  (context as BatchContext).hold?.(true);
  assert.deepEqual(moves, []);
  assert.equal(next.heldByAlignment, false);
});
