import type { Tracer } from "@opentelemetry/api";
import type { Clock } from "@sluice/core";
import type { DynamicSpec, PipelineSpec } from "@sluice/spec";
import type { DistributedThrottlerFactory } from "@sluice/client";
import type { AlignedPartition } from "../alignment/aligned-partition.ts";
import type { Computation, Logger } from "../computation.ts";
import type { Sink } from "../ports/sink.ts";
import type { ComputationStats } from "./computation-stats.ts";
import type { UnprocessedEventTimes } from "./unprocessed-event-times.ts";

/** What a Job (job.ts) is made of: its computation, partition, sink, throttlers and observers. */
export interface JobOptions {
  readonly pipeline: PipelineSpec;
  readonly computationName: string;
  readonly computation: Computation;
  readonly stream: string;
  readonly partition: number;
  readonly workerId: string;
  readonly sink: Sink;
  readonly throttlers: DistributedThrottlerFactory;
  /** The dynamic_spec in force now (it changes while the job runs). */
  readonly dynamicSpec: () => DynamicSpec;
  readonly stats: ComputationStats;
  readonly clock: Clock;
  readonly log: Logger;
  readonly tracer: Tracer;
  /**
   * What this job's computation partition has read and not processed, over all of its inputs: the
   * worker shares one between the jobs of a computation that read the same partition number of
   * different input streams, so their lag timestamp is one (docs/design.md §12). Default: the job's own.
   */
  readonly eventTimes?: UnprocessedEventTimes;
  /**
   * `watermark_alignment` (docs/design.md §12): the gate every iteration passes before it asks for quota.
   * Absent = the computation is not aligned.
   */
  readonly alignment?: AlignedPartition;
  /** Restart backoff after a failed iteration: doubles from min to max. */
  readonly restartBackoffMs?: { readonly min: number; readonly max: number };
}
