import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { validatePipelineSpec, type PipelineSpec } from "@sluice/spec";
import { defineComputation, MemoryIoFactory, Worker } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

function pipeline(): PipelineSpec {
  const result = validatePipelineSpec({
    pipeline: "eosmem",
    streams: { numbers: { topic: "numbers", partitions: 2 }, copies: { topic: "copies", partitions: 2 } },
    computations: { Copier: { module: "./unused.ts", inputs: ["numbers"], outputs: ["copies"], max_rows_per_batch: 10, delivery: "exactly_once" } },
  });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

describe("delivery exactly_once on the memory log", () => {
  it("outputs and offsets are applied together: every input copied once, a failed iteration leaves nothing, offsets at the end", async () => {
    const spec = pipeline();
    const io = new MemoryIoFactory(spec);
    for (let i = 0; i < 200; i++)
      io.log.append("numbers", { key: new TextEncoder().encode(`k${i}`), value: new TextEncoder().encode(JSON.stringify({ n: i })), timestampMs: 1_000 + i });
    let failOnce = true;
    const copier = defineComputation<{ n: number }>({
      process(batch, ctx) {
        for (const m of batch.messages) ctx.emit("copies", { key: m.key, value: { n: m.value.n } });
        if (failOnce && batch.messages.some((m) => m.value.n === 55)) {
          failOnce = false;
          throw new Error("fails once after emitting");
        }
      },
    });
    const quota = new FakeQuotaClient();
    quota.dynamicSpecJson = JSON.stringify(spec.dynamic_spec);
    const worker = new Worker({
      pipeline: spec,
      specDir: "/nowhere",
      io,
      quotaClient: () => quota,
      workerId: "w1",
      loaded: { Copier: copier },
      restartBackoffMs: { min: 1, max: 5 },
      log: { info: () => {}, warn: () => {}, error: () => {} },
    });
    await worker.start();
    const deadline = Date.now() + 10_000;
    while ((worker.stats()[0]?.rows ?? 0) < 200 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await worker.close();
    const copies = io.log
      .records("copies")
      .flat()
      .map((r) => (JSON.parse(new TextDecoder().decode(r.value ?? new Uint8Array())) as { n: number }).n);
    assert.equal(failOnce, false, "the failure happened");
    assert.equal(copies.length, 200, `${copies.length} copies`);
    assert.deepEqual(new Set(copies), new Set(Array.from({ length: 200 }, (_, i) => i)));
    for (let p = 0; p < 2; p++) assert.equal(io.log.committedOffset("eosmem.Copier", "numbers", p), io.log.endOffset("numbers", p));
  });
});
