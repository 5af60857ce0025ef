// A Sluice worker in its own process: the real Worker, Jobs and throttler clients over the memory log
// or Kafka, with an embedded controller or one reached over gRPC. Computations are defined here and
// only count and time what they see, so every figure is the framework's own cost.
//
// Events: started {at, cpuMs}; probe {stream, partition, latencyMs} for every message whose value carries
// `probeSentAt`; sample {at, computations} on request or every `sampleEveryMs`; finished {at, rows}
// once `finishAtRows` rows were processed (both with the process's CPU time so far, cpuMs); iterations {list} on request (per-iteration log).
// Commands: sample; append {stream, partition, timestampMs?} (a probe message); iterations.
// With `profileTo`: a CPU profile from just before worker.start() to `finished`, written there, then
// the event profiled {path}.
import { systemClock } from "@sluice/core";
import { Controller } from "@sluice/controller";
import { KafkaIoFactory } from "@sluice/kafka";
import { createGrpcQuotaClient, createInMemoryQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { defineComputation, encodeValue, MemoryIoFactory, Worker, type Computation, type IoFactory, type Logger } from "@sluice/runtime";
import { validatePipelineSpec } from "@sluice/spec";
import { configArgument, emit, onCommands, resourceUsage } from "../lib/child-io.ts";
import { CHILDREN_DIR } from "../lib/paths.ts";
import { startWindowProfile, type WindowProfile } from "../lib/window-profile.ts";

export interface PipelineProcessConfig {
  /** A pipeline spec as a user writes it. Its computations are replaced by the counting ones here. */
  readonly spec: unknown;
  /** "embedded": a Controller in this process (as `sluice run`); otherwise the controller's address. */
  readonly controller: "embedded" | string;
  /** Memory log only: records written before the worker starts. */
  readonly prefill?: readonly Prefill[];
  /** Emit `finished` once the computations processed this many rows in total. */
  readonly finishAtRows?: number;
  readonly sampleEveryMs?: number;
  /** Keep a log of every iteration (partition, time, last event timestamp) for `iterations`. */
  readonly logIterations?: boolean;
  /** Also emit every message, unchanged, to each output stream the spec gives the computation (what `delivery` applies to). */
  readonly relayToOutputs?: boolean;
  /** A `.cpuprofile` path: profile the timed window (worker.start() to `finished`) only. */
  readonly profileTo?: string;
}

export interface Prefill {
  readonly stream: string;
  readonly partition: number;
  readonly count: number;
  /** Event timestamps: first, then + stepMs per record. */
  readonly firstTimestampMs: number;
  readonly stepMs: number;
}

interface PartitionStats {
  rows: number;
  lastTimestampMs: number;
}

const config = configArgument<PipelineProcessConfig>();
const parsed = validatePipelineSpec(config.spec);
if (!parsed.ok) throw new Error(`pipeline spec invalid: ${JSON.stringify(parsed.issues)}`);
const spec = parsed.value;

const log: Logger = {
  info: () => {},
  warn: (line) => process.stderr.write(`warn: ${line}\n`),
  error: (line) => process.stderr.write(`error: ${line}\n`),
};

const stats = new Map<string, Map<number, PartitionStats>>();
const iterations: [string, number, number, number, number][] = [];
let totalRows = 0;
let finished = false;

function counting(name: string): Computation {
  const byPartition = new Map<number, PartitionStats>();
  stats.set(name, byPartition);
  const relayTo = config.relayToOutputs ? (spec.computations[name]?.outputs ?? []) : [];
  return defineComputation<unknown>({
    process(batch, ctx) {
      for (const stream of relayTo) for (const message of batch.messages) ctx.emit(stream, { key: message.key, value: message.value });
      const now = systemClock.now();
      let partition = byPartition.get(batch.partition);
      if (!partition) {
        partition = { rows: 0, lastTimestampMs: 0 };
        byPartition.set(batch.partition, partition);
      }
      partition.rows += batch.messages.length;
      const last = batch.messages[batch.messages.length - 1];
      if (last) partition.lastTimestampMs = last.timestampMs;
      for (const message of batch.messages) {
        const value = message.value as { probeSentAt?: unknown } | null;
        if (value !== null && typeof value === "object" && typeof value.probeSentAt === "number") {
          emit({ type: "probe", computation: name, stream: message.stream, partition: message.partition, latencyMs: now - value.probeSentAt });
        }
      }
      if (config.logIterations) iterations.push([name, batch.partition, now, batch.messages.length, last?.timestampMs ?? 0]);
      totalRows += batch.messages.length;
      if (!finished && config.finishAtRows !== undefined && totalRows >= config.finishAtRows) {
        finished = true;
        emit({ type: "finished", at: now, rows: totalRows, metrics: worker.throttlerMetrics(), cpuMs: resourceUsage().cpuMs });
        if (profile && config.profileTo) {
          const path = config.profileTo;
          void profile.stop(path).then(() => emit({ type: "profiled", path }));
        }
      }
    },
  });
}

const loaded = Object.fromEntries(Object.keys(spec.computations).map((name) => [name, counting(name)]));
let controller: Controller | null = null;
let client: QuotaServiceClient;
if (config.controller === "embedded") {
  controller = new Controller({ dynamicSpec: spec.dynamic_spec, computations: Object.keys(spec.computations), clock: systemClock });
  client = createInMemoryQuotaClient(controller);
} else {
  client = createGrpcQuotaClient(config.controller);
}

let io: IoFactory;
let memory: MemoryIoFactory | null = null;
if (spec.kafka) {
  io = new KafkaIoFactory(spec, { logLevel: "error", log: (entry) => process.stderr.write(`kafkajs ${entry.level}: ${entry.message}\n`) });
} else {
  memory = new MemoryIoFactory(spec);
  io = memory;
  for (const prefill of config.prefill ?? []) {
    const format = spec.streams[prefill.stream]?.format ?? "json";
    for (let i = 0; i < prefill.count; i++) {
      memory.log.append(prefill.stream, {
        key: null,
        value: encodeValue(format, { id: i }, "bench prefill"),
        partition: prefill.partition,
        timestampMs: prefill.firstTimestampMs + i * prefill.stepMs,
      });
    }
  }
}

const profile: WindowProfile | null = config.profileTo ? await startWindowProfile() : null;
const worker = new Worker({ pipeline: spec, specDir: CHILDREN_DIR, io, quotaClient: () => client, workerId: "bench", loaded, log, dynamicSpecWaitMs: 10_000 });
const startedAt = systemClock.now();
await worker.start();
emit({ type: "started", at: systemClock.now(), startAt: startedAt, cpuMs: resourceUsage().cpuMs });

function sample(): void {
  const computations = Object.fromEntries(
    [...stats].map(([name, byPartition]) => [name, Object.fromEntries([...byPartition].map(([partition, s]) => [partition, { ...s }]))]),
  );
  emit({ type: "sample", at: systemClock.now(), computations, metrics: worker.throttlerMetrics(), usage: resourceUsage() });
}

if (config.sampleEveryMs !== undefined) setInterval(sample, config.sampleEveryMs).unref();

onCommands((command) => {
  if (command.type === "sample") sample();
  else if (command.type === "iterations") emit({ type: "iterations", list: iterations });
  else if (command.type === "append" && memory) {
    const stream = String(command["stream"]);
    memory.log.append(stream, {
      key: null,
      value: encodeValue("json", { probeSentAt: systemClock.now() }, "bench probe"),
      partition: Number(command["partition"]),
      timestampMs: typeof command["timestampMs"] === "number" ? command["timestampMs"] : systemClock.now(),
    });
  }
});

const stop = async () => {
  await worker.close();
  client.close();
  controller?.close();
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
