import { defineComputation } from "@sluice/runtime";

// Squares each number. The rows throttler `rows_quota` (500/s in pipeline.json) is applied
// automatically before every Process iteration: each batch of up to 50 numbers waits for 50 rows of
// quota, so the whole pipeline runs at 500 messages per second however fast the numbers arrive.
export default defineComputation<{ n: number }>({
  process(batch, ctx) {
    for (const message of batch.messages) {
      ctx.emit("squares", { key: message.key, value: { n: message.value.n, square: message.value.n ** 2 } });
    }
  },
});
