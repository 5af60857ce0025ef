import { trace, type Tracer } from "@opentelemetry/api";
import { DistributedThrottlerFactory, DynamicSpecWatcher } from "@sluice/client";
import { systemClock, type Clock } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import type { DynamicSpec, PipelineSpec } from "@sluice/spec";
import type { Computation, Logger } from "./computation.ts";
import { consoleLogger } from "./console-logger.ts";
import { ComputationStats, type ComputationStatsView } from "./job/computation-stats.ts";
import { Job } from "./job/job.ts";
import { RetiredThrottlerTotals } from "./job/retired-throttler-totals.ts";
import { sumThrottlerMetrics, type ThrottlerMetricsView } from "./job/throttler-metrics-view.ts";
import { UnprocessedEventTimes } from "./job/unprocessed-event-times.ts";
import { loadComputation } from "./load-module.ts";
import type { IoFactory } from "./ports/io-factory.ts";
import type { Sink } from "./ports/sink.ts";
import type { BatchContext, PartitionRef, Source, SourceBatch } from "./ports/source.ts";
import { defaultWorkerId } from "./worker-id.ts";
import type { AlignedPartition } from "./alignment/aligned-partition.ts";
import { WatermarkAlignment, type AlignmentMetricsView } from "./alignment/watermark-alignment.ts";

export interface WorkerOptions {
  readonly pipeline: PipelineSpec;
  /** Directory of the spec file: computation modules are resolved against it. */
  readonly specDir: string;
  readonly io: IoFactory;
  /** The controller connection (gRPC, or in memory for an embedded controller). */
  readonly quotaClient: () => QuotaServiceClient;
  readonly workerId?: string;
  /** Run only these computations (default: all). */
  readonly computations?: readonly string[];
  /** Already loaded computations by name (tests); others are imported from their modules. */
  readonly loaded?: Readonly<Record<string, Computation>>;
  readonly clock?: Clock;
  readonly log?: Logger;
  readonly tracer?: Tracer;
  readonly restartBackoffMs?: { readonly min: number; readonly max: number };
  /** How long start() waits for the controller's dynamic_spec before using the spec file's. */
  readonly dynamicSpecWaitMs?: number;
  /** How often aligned partitions are reported to the controller (docs/design.md §12). Default 1 s. */
  readonly alignmentReportIntervalMs?: number;
}

interface RunningComputation {
  readonly name: string;
  readonly computation: Computation;
  readonly source: Source;
  readonly stats: ComputationStats;
}

/**
 * A worker process's runtime: for each computation it runs, one Source (Kafka: one consumer group
 * `<pipeline>.<computation>`); each partition the source delivers becomes a Job with its own
 * throttler clients (its lag timestamp is its own). The dynamic_spec comes from the controller and
 * is applied to every job's clients as it changes.
 */
export class Worker {
  readonly workerId: string;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly tracer: Tracer;
  private readonly jobs = new Map<string, Job>();
  /** Per computation partition, shared by its jobs over the input streams (one lag timestamp, docs/design.md §12). */
  private readonly eventTimes = new Map<string, UnprocessedEventTimes>();
  private readonly running: RunningComputation[] = [];
  /** Sensors of the jobs this worker stopped, one running total per computation and throttler. */
  private readonly retiredMetrics = new RetiredThrottlerTotals();
  /** Jobs being stopped: still counted one by one until their close() is done and they are folded in. */
  private readonly stoppingJobs = new Set<Job>();
  private readonly watcher: DynamicSpecWatcher;
  /** Watermark alignment of this worker's aligned partitions (docs/design.md §12). */
  private readonly alignment: WatermarkAlignment;
  private dynamicSpec: DynamicSpec;
  private sink: Sink | null = null;
  private started: Promise<void> | null = null;
  private closing: Promise<void> | null = null;

  constructor(private readonly options: WorkerOptions) {
    this.workerId = options.workerId ?? defaultWorkerId();
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? consoleLogger(`worker ${this.workerId}`);
    this.tracer = options.tracer ?? trace.getTracer("@sluice/runtime");
    this.dynamicSpec = options.pipeline.dynamic_spec;
    this.watcher = new DynamicSpecWatcher({
      client: options.quotaClient,
      clientId: this.workerId,
      clock: this.clock,
      log: (line) => this.log.warn(line),
      onSpec: (spec, version) => this.applyDynamicSpec(spec, version),
    });
    this.alignment = new WatermarkAlignment({
      workerId: this.workerId,
      client: options.quotaClient,
      clock: this.clock,
      log: this.log,
      ...(options.alignmentReportIntervalMs !== undefined ? { reportIntervalMs: options.alignmentReportIntervalMs } : {}),
    });
  }

  /** Loads computations, takes the controller's dynamic_spec, starts every source. Idempotent. */
  start(): Promise<void> {
    this.started ??= this.doStart();
    return this.started;
  }

  get currentDynamicSpec(): DynamicSpec {
    return this.dynamicSpec;
  }

  stats(): ComputationStatsView[] {
    const now = this.clock.now();
    return this.running.map((r) => r.stats.view(now));
  }

  /** Worker sensors per computation and throttler, summed over its jobs (live and finished). */
  throttlerMetrics(): ThrottlerMetricsView[] {
    const sums = new Map<string, ThrottlerMetricsView>();
    const add = (m: ThrottlerMetricsView) => {
      const key = `${m.computation}\u0000${m.throttlerId}`;
      const prev = sums.get(key);
      sums.set(key, prev ? sumThrottlerMetrics(prev, m) : m);
    };
    this.retiredMetrics.views(this.clock.now()).forEach(add);
    for (const job of this.jobs.values()) job.throttlerMetrics().forEach(add);
    for (const job of this.stoppingJobs) job.throttlerMetrics().forEach(add);
    return [...sums.values()];
  }

  /** Aligned partitions on this worker, and how many are held, per computation and group. */
  alignmentMetrics(): AlignmentMetricsView[] {
    return this.alignment.metrics();
  }

  /** The watermark of an alignment group as the controller last told this worker (epoch ms; 0 = unknown). */
  alignmentGroupWatermarkMs(group: string): number {
    return this.alignment.groupWatermarkMs(group);
  }

  /** Stops sources (handlers in flight finish or abort), closes jobs, returns quota. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doStart(): Promise<void> {
    const { pipeline } = this.options;
    const names = this.options.computations ?? Object.keys(pipeline.computations);
    const loaded = await Promise.all(
      names.map(async (name) => {
        const spec = pipeline.computations[name];
        if (!spec) throw new Error(`computation "${name}" is not in the spec (computations: ${Object.keys(pipeline.computations).join(", ")})`);
        return { name, computation: this.options.loaded?.[name] ?? (await loadComputation(this.options.specDir, spec.module, name)) };
      }),
    );
    const waitMs = this.options.dynamicSpecWaitMs ?? 5000;
    const waited = new AbortController();
    const first = await Promise.race([
      this.watcher.start().then(() => true),
      this.clock.sleep(waitMs, waited.signal).then(
        () => false,
        () => true,
      ),
    ]);
    waited.abort(); // no timer left behind once the controller answered
    if (!first)
      this.log.warn(`no dynamic_spec from the controller after ${waitMs} ms; starting with the spec file's and applying the controller's when it arrives`);
    this.sink = this.options.io.createSink(pipeline);
    for (const { name, computation } of loaded) {
      const spec = pipeline.computations[name];
      if (!spec) continue;
      const source = this.options.io.createSource(name, spec, pipeline);
      const running: RunningComputation = { name, computation, source, stats: new ComputationStats(name) };
      this.running.push(running);
      await source.start((batch, context) => this.deliver(running, batch, context), {
        // Assigned partitions join their alignment group at once: one that has not read yet holds
        // the others back until it reads or is idle (docs/design.md §12).
        onAssigned: (partitions) => {
          for (const { stream, partition } of partitions) this.alignedPartition(name, stream, partition);
        },
        onRevoked: (partitions) => void this.stopJobs(name, partitions),
      });
    }
    this.log.info(`started ${loaded.map((l) => l.name).join(", ")} (dynamic_spec version ${this.watcher.currentVersion || "from the spec file"})`);
  }

  private async deliver(running: RunningComputation, batch: SourceBatch, context: BatchContext): Promise<void> {
    if (this.closing) return;
    const key = jobKey(running.name, batch.stream, batch.partition);
    let job = this.jobs.get(key);
    if (!job) {
      job = this.createJob(running, batch.stream, batch.partition);
      this.jobs.set(key, job);
      running.stats.activeJobs += 1;
    }
    await job.handle(batch, context);
  }

  private createJob(running: RunningComputation, stream: string, partition: number): Job {
    const jobId = `${this.workerId}/${running.name}/${partition}`;
    const throttlers = new DistributedThrottlerFactory({
      computation: running.name,
      clientId: jobId,
      client: this.options.quotaClient,
      clock: this.clock,
    });
    throttlers.reconfigure(this.dynamicSpec);
    const sink = this.sink;
    if (!sink) throw new Error("worker not started");
    return new Job({
      pipeline: this.options.pipeline,
      computationName: running.name,
      computation: running.computation,
      stream,
      partition,
      workerId: this.workerId,
      sink,
      throttlers,
      dynamicSpec: () => this.dynamicSpec,
      stats: running.stats,
      eventTimes: this.eventTimesOf(running, partition),
      ...this.alignmentOf(running.name, stream, partition),
      clock: this.clock,
      log: this.log,
      tracer: this.tracer,
      ...(this.options.restartBackoffMs ? { restartBackoffMs: this.options.restartBackoffMs } : {}),
    });
  }

  private alignedPartition(computation: string, stream: string, partition: number): AlignedPartition | undefined {
    const alignment = this.options.pipeline.computations[computation]?.watermark_alignment;
    if (!alignment || this.closing) return undefined;
    return this.alignment.partition(computation, stream, partition, {
      groupName: alignment.group_name,
      driftBoundMs: alignment.drift_bound,
      idleTimeoutMs: alignment.idle_timeout,
    });
  }

  private alignmentOf(computation: string, stream: string, partition: number): { alignment?: AlignedPartition } {
    const aligned = this.alignedPartition(computation, stream, partition);
    return aligned ? { alignment: aligned } : {};
  }

  private eventTimesOf(running: RunningComputation, partition: number): UnprocessedEventTimes {
    const key = `${running.name}\u0000${partition}`;
    let eventTimes = this.eventTimes.get(key);
    if (!eventTimes) {
      const created = new UnprocessedEventTimes();
      running.stats.watchLagTimestamp(() => created.lagTimestamp());
      this.eventTimes.set(key, created);
      eventTimes = created;
    }
    return eventTimes;
  }

  private async stopJobs(computation: string, partitions: readonly PartitionRef[]): Promise<void> {
    const running = this.running.find((r) => r.name === computation);
    await Promise.all(
      partitions.map(async ({ stream, partition }) => {
        const key = jobKey(computation, stream, partition);
        this.alignment.forget(computation, stream, partition);
        const job = this.jobs.get(key);
        if (!job) return;
        this.jobs.delete(key);
        if (running) running.stats.activeJobs -= 1;
        // Counted as stopping until closed (what its last calls and its returned pool record counts
        // too), then folded in: no scrape in between sees its counters go down.
        this.stoppingJobs.add(job);
        try {
          await job.close();
        } finally {
          job.foldThrottlerMetrics(this.retiredMetrics);
          this.stoppingJobs.delete(job);
        }
      }),
    );
  }

  private applyDynamicSpec(spec: DynamicSpec, version: number): void {
    this.dynamicSpec = spec;
    for (const job of this.jobs.values()) job.reconfigure(spec, version);
    if (this.running.length > 0) this.log.info(`applied dynamic_spec version ${version}`);
  }

  private async doClose(): Promise<void> {
    await this.started?.catch(() => undefined);
    await Promise.all(this.running.map((r) => r.source.close()));
    await this.alignment.close();
    await Promise.all([...this.jobs.values()].map((job) => job.close()));
    await this.watcher.close();
    await this.sink?.close();
    await this.options.io.close();
  }
}

function jobKey(computation: string, stream: string, partition: number): string {
  return `${computation}\u0000${stream}\u0000${partition}`;
}
