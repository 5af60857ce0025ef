// The Source and Sink contract (packages/runtime/src/ports), run once per implementation: the memory
// log (test/integration/source-sink-memory.test.ts) and Kafka
// (packages/kafka/test/source-sink-contract.test.ts). Whatever the log is, a computation sees what
// the sink sent (key, value, headers, timestamp, partition) once each and in offset order; a new
// source of the same computation resumes after the last commit; rewind delivers the uncommitted
// records again. Real clock; waits are bounded by conditions, not sleeps.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import type { BatchContext, IoFactory, SinkRecord, SourceBatch, SourceRecord } from "@sluice/runtime";
import type { PipelineSpec } from "@sluice/spec";

/** What one implementation gives the contract: a pipeline whose computation `Reader` reads stream `events`. */
export interface SourceSinkSubject {
  setup(t: TestContext, partitions: number): Promise<{ spec: PipelineSpec; factory: IoFactory }>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const text = (bytes: Uint8Array | null | undefined) => (bytes == null ? null : decoder.decode(bytes));
/** A broker's group join and first fetch take seconds on a loaded machine. */
const WAIT_MS = 90_000;

function record(seq: number, partition: number): SinkRecord {
  return {
    // One record without a key: the contract covers a null key too.
    key: seq === 0 ? null : encoder.encode(`key-${seq}`),
    value: encoder.encode(JSON.stringify({ seq })),
    headers: { seq: encoder.encode(String(seq)), kind: encoder.encode(seq % 2 === 0 ? "even" : "odd") },
    partition,
    timestampMs: Date.UTC(2024, 0, 1) + seq,
  };
}

const seqOf = (r: SourceRecord) => Number(text(r.headers["seq"]));

type Handler = (batch: SourceBatch, context: BatchContext) => Promise<void>;

/** Runs a source of `Reader` with `handler` until `done()` holds, then closes it. */
async function consume(spec: PipelineSpec, factory: IoFactory, handler: Handler, done: () => boolean, what: string): Promise<void> {
  const computation = spec.computations["Reader"];
  assert.ok(computation, "the subject's pipeline has a computation Reader");
  const source = factory.createSource("Reader", computation, spec);
  await source.start(handler);
  try {
    const deadline = Date.now() + WAIT_MS;
    while (!done()) {
      assert.ok(Date.now() < deadline, `${what}: not done after ${WAIT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await source.close();
  }
}

export function sourceSinkContract(name: string, subject: SourceSinkSubject): void {
  describe(`Source and Sink contract: ${name}`, { timeout: 300_000 }, () => {
    it("delivers what the sink sent, key, value, headers, timestamp and partition, each once and in offset order", async (t) => {
      const partitions = 3;
      const { spec, factory } = await subject.setup(t, partitions);
      const sent = Array.from({ length: 30 }, (_, seq) => record(seq, seq % partitions));
      const sink = factory.createSink(spec);
      await sink.send("events", sent.slice(0, 10));
      await sink.send("events", sent.slice(10));
      await sink.close();

      const received = new Map<number, SourceRecord[]>();
      let total = 0;
      await consume(
        spec,
        factory,
        async (batch, context) => {
          assert.equal(batch.stream, "events");
          received.set(batch.partition, [...(received.get(batch.partition) ?? []), ...batch.records]);
          total += batch.records.length;
          const last = batch.records.at(-1);
          if (last) await context.commit((BigInt(last.offset) + 1n).toString());
        },
        () => total >= sent.length,
        "30 records",
      );
      assert.equal(total, sent.length, "each record once");
      for (let partition = 0; partition < partitions; partition++) {
        const got = received.get(partition) ?? [];
        const offsets = got.map((r) => BigInt(r.offset));
        assert.ok(
          offsets.every((o, i) => i === 0 || o > (offsets[i - 1] ?? -1n)),
          `partition ${partition}: offsets in order (${offsets.join(", ")})`,
        );
        const expected = sent.filter((r) => r.partition === partition);
        assert.deepEqual(
          got.map((r) => ({ key: text(r.key), value: text(r.value), seq: text(r.headers["seq"]), kind: text(r.headers["kind"]), timestampMs: r.timestampMs })),
          expected.map((r) => ({
            key: text(r.key),
            value: text(r.value),
            seq: text(r.headers?.["seq"]),
            kind: text(r.headers?.["kind"]),
            timestampMs: r.timestampMs,
          })),
          `partition ${partition}: what was sent to it, in the order it was sent`,
        );
      }
    });

    it("a new source of the same computation resumes after the last committed offset", async (t) => {
      const { spec, factory } = await subject.setup(t, 1);
      const sink = factory.createSink(spec);
      await sink.send(
        "events",
        Array.from({ length: 10 }, (_, seq) => record(seq, 0)),
      );
      await sink.close();

      const first: number[] = [];
      await consume(
        spec,
        factory,
        async (batch, context) => {
          for (const r of batch.records) {
            first.push(seqOf(r));
            // Commits after the fifth record only: the rest is read but never committed.
            if (seqOf(r) === 4) await context.commit((BigInt(r.offset) + 1n).toString());
          }
        },
        () => first.length >= 10,
        "the first source",
      );
      const second: number[] = [];
      await consume(
        spec,
        factory,
        async (batch) => {
          second.push(...batch.records.map(seqOf));
        },
        () => second.length >= 5,
        "the second source",
      );
      assert.deepEqual(first, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      assert.deepEqual(second, [5, 6, 7, 8, 9], "from the record after the commit, none before it");
    });

    it("rewind delivers the uncommitted records again, in order", async (t) => {
      const { spec, factory } = await subject.setup(t, 1);
      const sink = factory.createSink(spec);
      await sink.send(
        "events",
        Array.from({ length: 6 }, (_, seq) => record(seq, 0)),
      );
      await sink.close();

      const seen: number[] = [];
      let rewound = false;
      await consume(
        spec,
        factory,
        async (batch, context) => {
          seen.push(...batch.records.map(seqOf));
          const last = batch.records.at(-1);
          if (!rewound && seen.length >= 6) {
            // A failed iteration: nothing committed, back to the last commit (none: the start).
            rewound = true;
            context.rewind();
            return;
          }
          if (rewound && last) await context.commit((BigInt(last.offset) + 1n).toString());
        },
        () => seen.length >= 12,
        "6 records twice",
      );
      assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5]);
    });
  });
}
