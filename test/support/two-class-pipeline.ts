import { join } from "node:path";
import { NOOP_COMPUTATION, ROOT, writeSpec } from "./processes.ts";

export const SEQUENCE_GENERATOR = join(ROOT, "test/fixtures/sequence-generator.ts");

/**
 * An embedded pipeline that keeps a throttler busy for minutes: two computations on one rows
 * throttler (`api_quota`, 300/s) in classes `interactive` (weight 3) and `batch` (weight 1), both
 * backlogged, so the observed shares settle at 75 % / 25 %; and a bytes throttler (`bytes_quota`,
 * 20,000 B/s) that Interactive stays well under.
 */
export function writeTwoClassPipeline(options: { messages?: number; rowsLimit?: number } = {}): string {
  const messages = options.messages ?? 100_000;
  return writeSpec({
    pipeline: "two-classes",
    streams: {
      interactive: { topic: "interactive", partitions: 2, generator: { module: SEQUENCE_GENERATOR, messages } },
      batch: { topic: "batch", partitions: 2, generator: { module: SEQUENCE_GENERATOR, messages } },
    },
    computations: {
      Interactive: { module: NOOP_COMPUTATION, inputs: ["interactive"], outputs: [], max_rows_per_batch: 20 },
      Batch: { module: NOOP_COMPUTATION, inputs: ["batch"], outputs: [], max_rows_per_batch: 20 },
    },
    dynamic_spec: {
      throttlers: {
        api_quota: {
          limit: options.rowsLimit ?? 300,
          period: "1s",
          request_period: "200ms",
          classes: { interactive: { weight: 3 }, batch: { weight: 1 } },
        },
        bytes_quota: { limit: 20_000, period: "1s", request_period: "200ms" },
      },
      computations: {
        Interactive: { input_rows_throttler_id: "api_quota", input_rows_throttler_class_id: "interactive", input_bytes_throttler_id: "bytes_quota" },
        Batch: { input_rows_throttler_id: "api_quota", input_rows_throttler_class_id: "batch" },
      },
    },
  });
}
