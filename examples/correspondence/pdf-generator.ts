import { defineComputation } from "@sluice/runtime";
import { generatePdf } from "./fake-pdf-generator.ts";

// Generates one PDF per letter. The smooth throttler `pdf` (10/s, pipeline.json) is applied before
// every Process iteration; with max_rows_per_batch 1 each letter waits for its own slot, so the
// generator sees at most 10 calls in any second, however the letters arrive. A burst waits in the
// `letters` stream (in Kafka: durably, in the topic) and shows as lag until it drains.
export default defineComputation<{ id: string; createdAt: number }>({
  async process(batch, ctx) {
    for (const message of batch.messages) {
      const waitedMs = Date.now() - message.value.createdAt;
      await generatePdf(message.value.id, waitedMs);
      ctx.emit("pdfs", { key: message.key, value: { id: message.value.id, waitedMs } });
    }
  },
});
