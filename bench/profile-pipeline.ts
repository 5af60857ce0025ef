// Profiling aid (not part of `pnpm bench`): runs the memory-log pipeline child once per variant,
// optionally under `node --cpu-prof`, and prints messages/s and the throttlers' wait counters.
//   node --import tsx bench/profile-pipeline.ts [--rows N] [--rounds N] [--prof DIR] [variant...]
// variants: none, grpc, embedded (default: all three, interleaved per round).
import { BenchChild } from "./lib/child.ts";

const args = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const [value] = args.splice(at, 2).slice(1);
  return value ?? fallback;
};
const rows = Number(option("rows", "600000"));
const rounds = Number(option("rounds", "1"));
const profDir = option("prof", "");
const variants = args.length > 0 ? args : ["none", "grpc", "embedded"];
const PARTITIONS = 4;

function spec(throttled: boolean): Record<string, unknown> {
  return {
    pipeline: "profile",
    streams: { input: { topic: "input", partitions: PARTITIONS } },
    computations: { Count: { module: "./noop-computation.ts", inputs: ["input"], max_rows_per_batch: 100 } },
    dynamic_spec: {
      throttlers: { rows: {}, bytes: {} },
      computations: throttled ? { Count: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } } : {},
    },
  };
}

const controller = BenchChild.start("controller-process.ts", { mode: "sluice", spec: spec(true) });
const address = String((await controller.waitForType("ready", 30_000))["address"]);
try {
  for (let round = 0; round < rounds; round++) {
    for (const variant of variants) {
      const child = BenchChild.start(
        "pipeline-process.ts",
        {
          spec: spec(variant !== "none"),
          controller: variant === "grpc" ? address : "embedded",
          finishAtRows: rows,
          prefill: Array.from({ length: PARTITIONS }, (_, partition) => ({ stream: "input", partition, count: rows / PARTITIONS, firstTimestampMs: Date.now(), stepMs: 0 })),
        },
        profDir ? { nodeArgs: ["--cpu-prof", "--cpu-prof-interval", "200", `--cpu-prof-dir=${profDir}/${variant}-${round}`] } : {},
      );
      try {
        const started = await child.waitForType("started", 60_000);
        const finished = await child.waitForType("finished", 120_000);
        const rate = (Number(finished["rows"]) * 1000) / (Number(finished["at"]) - Number(started["at"]));
        const metrics = (finished["metrics"] ?? []) as { throttlerId: string; waitCount: number; waitSumMs: number; rpcCount: number }[];
        const waitCount = metrics.reduce((sum, m) => sum + m.waitCount, 0);
        const waitMs = metrics.reduce((sum, m) => sum + m.waitSumMs, 0);
        const rpcs = metrics.reduce((sum, m) => sum + m.rpcCount, 0);
        const waits = `${waitCount} waits, ${Math.round(waitMs)} ms waited, ${rpcs} RPCs (all jobs and throttlers)`;
        console.log(`round ${round + 1} ${variant}: ${Math.round(rate).toLocaleString("en-US")} messages/s ${waits}`);
      } finally {
        await child.stop();
      }
    }
  }
} finally {
  await controller.stop();
}
