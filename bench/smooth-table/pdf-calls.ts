// The computation of bench/smooth-table.ts, as issue 10 measured: before each call of the protected
// system, `await ctx.getThrottlerOrThrow("pdf").throttle(1)`; the "call" is the instant the throttle
// returns, appended (epoch ms, sub-ms) to the file named by SMOOTH_TABLE_CALLS.
import { appendFileSync } from "node:fs";
import { defineComputation } from "@sluice/runtime";

const out = process.env["SMOOTH_TABLE_CALLS"];
if (!out) throw new Error("SMOOTH_TABLE_CALLS must name the file the call times are appended to");
const file: string = out;

export default defineComputation({
  async process(batch, ctx) {
    const pdf = ctx.getThrottlerOrThrow("pdf");
    for (const _message of batch.messages) {
      await pdf.throttle(1);
      appendFileSync(file, `${(performance.timeOrigin + performance.now()).toFixed(3)}\n`);
    }
  },
});
