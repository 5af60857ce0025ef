import type { ComputationSpec, PipelineSpec } from "@sluice/spec";
import type { IoFactory } from "../ports/io-factory.ts";
import type { Sink } from "../ports/sink.ts";
import type { Source } from "../ports/source.ts";
import { MemoryLog } from "./memory-log.ts";
import { MemorySink } from "./memory-sink.ts";
import { MemorySource } from "./memory-source.ts";

/** Embedded mode: every stream is an in-memory partitioned log with `partitions` partitions. */
export class MemoryIoFactory implements IoFactory {
  readonly log: MemoryLog;

  constructor(pipeline: PipelineSpec, now?: () => number) {
    const partitions = Object.fromEntries(Object.entries(pipeline.streams).map(([name, s]) => [name, s.partitions]));
    this.log = new MemoryLog(partitions, now);
  }

  createSource(computation: string, spec: ComputationSpec, pipeline: PipelineSpec): Source {
    return new MemorySource(this.log, `${pipeline.pipeline}.${computation}`, spec.inputs);
  }

  createSink(): Sink {
    return new MemorySink(this.log);
  }

  async close(): Promise<void> {}
}
