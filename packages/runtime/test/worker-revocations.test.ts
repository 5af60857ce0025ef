import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { validatePipelineSpec } from "@sluice/spec";
import { defineComputation, Worker, type BatchHandler, type IoFactory, type Sink, type Source, type SourceListener } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

// A worker whose partitions keep moving: every delivered batch is followed by the revocation of its
// partition, so each batch runs in a job of its own that is then stopped.

const PARTITIONS = 3;
const ROUNDS = 300;
const ROWS_PER_BATCH = 2;

/** Delivers one batch per round on partition `round % 3`, then revokes that partition. */
class RevokingSource implements Source {
  done!: Promise<void>;

  async start(handler: BatchHandler, listener?: SourceListener): Promise<void> {
    this.done = (async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const partition = round % PARTITIONS;
        const records = Array.from({ length: ROWS_PER_BATCH }, (_, i) => ({
          key: null,
          value: new TextEncoder().encode(JSON.stringify({ n: round * ROWS_PER_BATCH + i })),
          headers: {},
          offset: String(round * ROWS_PER_BATCH + i),
          timestampMs: 1_000,
        }));
        await handler({ stream: "numbers", partition, records }, { signal: new AbortController().signal, commit: async () => {}, rewind: () => {} });
        listener?.onRevoked?.([{ stream: "numbers", partition }]);
        await new Promise((resolve) => setImmediate(resolve)); // let the revoked job close
      }
    })();
  }

  async close(): Promise<void> {
    await this.done;
  }
}

const discard: Sink = { send: async () => {}, close: async () => {} };

describe("Worker: throttler sensors of stopped jobs", () => {
  it("folds each stopped job into one running total per computation and throttler: nothing lost, nothing kept per job", async () => {
    const parsed = validatePipelineSpec({
      pipeline: "revoking",
      streams: { numbers: { topic: "numbers", partitions: PARTITIONS } },
      computations: { Counter: { module: "./unused.ts", inputs: ["numbers"], max_rows_per_batch: 100 } },
      dynamic_spec: {
        throttlers: { rows: { limit: 1e6 }, bytes: { limit: 1e12 } },
        computations: { Counter: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } },
      },
    });
    assert.ok(parsed.ok);
    const spec = parsed.value;
    const source = new RevokingSource();
    const io: IoFactory = { createSource: () => source, createSink: () => discard, close: async () => {} };
    const quota = new FakeQuotaClient();
    quota.dynamicSpecJson = JSON.stringify(spec.dynamic_spec);
    const worker = new Worker({
      pipeline: spec,
      specDir: "/nowhere",
      io,
      quotaClient: () => quota,
      workerId: "w1",
      loaded: { Counter: defineComputation({ process() {} }) },
      log: { info: () => {}, warn: () => {}, error: () => {} },
    });
    await worker.start();
    await source.done;
    await new Promise((resolve) => setImmediate(resolve));

    const metrics = worker.throttlerMetrics();
    assert.deepEqual(metrics.map((m) => [m.computation, m.throttlerId]).sort(), [
      ["Counter", "bytes"],
      ["Counter", "rows"],
    ]);
    const rows = metrics.find((m) => m.throttlerId === "rows");
    assert.equal(rows?.consumed, ROUNDS * ROWS_PER_BATCH, "every stopped job's rows are in the total");
    assert.equal(rows?.rpcCount, quota.calls.filter((c) => c.throttlerId === "rows").length, "every RPC counted once");
    assert.ok((rows?.returned ?? 0) > 0, "the pools each stopped job returned are counted");
    // White-box, because the defect was memory: one total per (computation, throttler) after 300
    // stopped jobs, not 600 per-job views kept and re-summed on every scrape.
    const retired = Reflect.get(worker, "retiredMetrics") as { size?: unknown };
    assert.equal(retired.size, 2);
    await worker.close();
  });
});
