import type { ComputationSpec, PipelineSpec } from "@sluice/spec";
import type { Sink } from "./sink.ts";
import type { Source } from "./source.ts";

/**
 * Where a worker gets its sources and sinks: the in-memory log or Kafka. One Source per computation
 * (Kafka: one consumer group `<pipeline>.<computation>`), one Sink per worker.
 */
export interface IoFactory {
  createSource(computation: string, spec: ComputationSpec, pipeline: PipelineSpec): Source;
  createSink(pipeline: PipelineSpec): Sink;
  close(): Promise<void>;
}
