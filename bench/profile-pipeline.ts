// Profiling aid (not part of `pnpm bench`): runs the pipeline child once per variant, optionally
// under `node --cpu-prof`, and prints messages/s and the throttlers' wait counters.
//   node --import tsx bench/profile-pipeline.ts [--rows N] [--rounds N] [--prof DIR [--window]] [--kafka] [variant...]
// --prof DIR: `node --cpu-prof` of each child's whole life into DIR/<variant>-<round>/; with --window,
// a profile of the timed window only (from the worker's start or the consumer's connect to the last
// message), DIR/<variant>-<round>.cpuprofile.
// Memory log (default) variants: none, grpc, embedded (default: all three, interleaved per round).
// With --kafka (KAFKA_BROKERS or 127.0.0.1:19092; one topic of N messages made for the run), variants:
// bare (the bench's bare kafkajs eachBatch consumer), none, grpc (default: all three). Both modes also
// take none-grpc: no throttler, with the controller over gRPC all the same (what gRPC alone costs).
// Each line gives messages/s and the child's CPU time per message over the timed window (the figure
// that a loaded machine disturbs least).
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { BenchChild } from "./lib/child.ts";
import { createTopic, ensureBroker, produce, type Broker } from "./lib/kafka.ts";

const args = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const [value] = args.splice(at, 2).slice(1);
  return value ?? fallback;
};
const flag = (name: string) => {
  const at = args.indexOf(`--${name}`);
  if (at >= 0) args.splice(at, 1);
  return at >= 0;
};
const rows = Number(option("rows", "600000"));
const rounds = Number(option("rounds", "1"));
const profDir = option("prof", "");
const kafka = flag("kafka");
const windowOnly = flag("window");
const variants = args.length > 0 ? args : kafka ? ["bare", "none", "grpc"] : ["none", "grpc", "embedded"];
const PARTITIONS = 4;

function spec(throttled: boolean, topic?: { brokers: readonly string[]; name: string; group: string }): Record<string, unknown> {
  return {
    pipeline: topic?.group ?? "profile",
    ...(topic ? { kafka: { brokers: topic.brokers, session_timeout: "10s" } } : {}),
    streams: { input: { topic: topic?.name ?? "input", partitions: PARTITIONS } },
    computations: { Count: { module: "./noop-computation.ts", inputs: ["input"], max_rows_per_batch: 100 } },
    dynamic_spec: {
      throttlers: { rows: {}, bytes: {} },
      computations: throttled ? { Count: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } } : {},
    },
  };
}

const profiled = (variant: string, round: number) =>
  profDir && !windowOnly ? { nodeArgs: ["--cpu-prof", "--cpu-prof-interval", "200", `--cpu-prof-dir=${profDir}/${variant}-${round}`] } : {};
const windowProfile = (variant: string, round: number) => (profDir && windowOnly ? { profileTo: `${profDir}/${variant}-${round}.cpuprofile` } : {});
/** The child writes its window profile after `finished`; stopping it before would lose it. */
const profileWritten = async (child: BenchChild) => {
  if (profDir && windowOnly) await child.waitForType("profiled", 60_000);
};

interface Metric {
  throttlerId: string;
  waitCount: number;
  waitSumMs: number;
  rpcCount: number;
}

/**
 * The child's CPU time (user + system, all its threads: GC helpers too) per message over the timed
 * window. On a shared machine a run's messages/s moves with what else runs; its CPU per message
 * much less, so this is the figure to compare between variants and versions there.
 */
function cpuPerMessage(start: Record<string, unknown>, end: Record<string, unknown>, messages: number): string {
  const cpuMs = Number(end["cpuMs"]) - Number(start["cpuMs"]);
  return Number.isFinite(cpuMs) && messages > 0 ? `${((cpuMs * 1000) / messages).toFixed(2)} µs CPU/message` : "";
}

function describeWaits(finished: Record<string, unknown>): string {
  const metrics = (finished["metrics"] ?? []) as Metric[];
  const waitCount = metrics.reduce((sum, m) => sum + m.waitCount, 0);
  const waitMs = metrics.reduce((sum, m) => sum + m.waitSumMs, 0);
  const rpcs = metrics.reduce((sum, m) => sum + m.rpcCount, 0);
  return `${waitCount} waits, ${Math.round(waitMs)} ms waited, ${rpcs} RPCs (all jobs and throttlers)`;
}

async function runBare(broker: Broker, topic: string, round: number): Promise<string> {
  const child = BenchChild.start(
    "kafka-bare-consumer.ts",
    { brokers: broker.brokers, topic, groupId: `profile-bare-${randomUUID().slice(0, 8)}`, partitions: PARTITIONS, rows, ...windowProfile("bare", round) },
    profiled("bare", round),
  );
  try {
    const joined = await child.waitForType("joined", 60_000);
    const finished = await child.waitForType("finished", 180_000);
    await profileWritten(child);
    return `${Math.round((rows * 1000) / (Number(finished["at"]) - Number(joined["at"]))).toLocaleString("en-US")} messages/s ${cpuPerMessage(joined, finished, rows)}`;
  } finally {
    await child.stop();
  }
}

async function runPipeline(variant: string, address: string, round: number, broker: Broker | null, topic: string): Promise<string> {
  // "none-grpc": no throttler, but the dynamic_spec watched from the controller over gRPC, as "grpc" does.
  const throttled = variant !== "none" && variant !== "none-grpc";
  const group = `profile-${variant}-${randomUUID().slice(0, 8)}`;
  const child = BenchChild.start(
    "pipeline-process.ts",
    {
      spec: spec(throttled, broker ? { brokers: broker.brokers, name: topic, group } : undefined),
      controller: variant === "grpc" ? address : variant === "none-grpc" ? unthrottledAddress : "embedded",
      finishAtRows: rows,
      ...windowProfile(variant, round),
      ...(broker
        ? {}
        : {
            prefill: Array.from({ length: PARTITIONS }, (_, partition) => ({
              stream: "input",
              partition,
              count: rows / PARTITIONS,
              firstTimestampMs: Date.now(),
              stepMs: 0,
            })),
          }),
    },
    profiled(variant, round),
  );
  try {
    const started = await child.waitForType("started", 60_000);
    const finished = await child.waitForType("finished", 180_000);
    const rate = (Number(finished["rows"]) * 1000) / (Number(finished["at"]) - Number(started["at"]));
    await profileWritten(child);
    return `${Math.round(rate).toLocaleString("en-US")} messages/s ${cpuPerMessage(started, finished, Number(finished["rows"]))} ${describeWaits(finished)}`;
  } finally {
    await child.stop();
  }
}

if (profDir) mkdirSync(profDir, { recursive: true });
const broker = kafka ? await ensureBroker() : null;
const topic = `profile-${randomUUID().slice(0, 8)}`;
if (broker) {
  await createTopic(broker.brokers, topic, PARTITIONS);
  await produce(broker.brokers, topic, rows, PARTITIONS);
}
const controller = BenchChild.start("controller-process.ts", { mode: "sluice", spec: spec(true) });
const address = String((await controller.waitForType("ready", 30_000))["address"]);
// A worker takes its dynamic_spec from the controller, so "none-grpc" needs one that throttles nothing.
const unthrottling = variants.includes("none-grpc") ? BenchChild.start("controller-process.ts", { mode: "sluice", spec: spec(false) }) : null;
const unthrottledAddress = unthrottling ? String((await unthrottling.waitForType("ready", 30_000))["address"]) : "";
try {
  for (let round = 0; round < rounds; round++) {
    for (const variant of variants) {
      const line = variant === "bare" && broker ? await runBare(broker, topic, round) : await runPipeline(variant, address, round, broker, topic);
      console.log(`round ${round + 1} ${variant}: ${line}`);
    }
  }
} finally {
  await controller.stop();
  await unthrottling?.stop();
  await broker?.stop();
}
