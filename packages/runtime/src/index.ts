// What users of @sluice/runtime may import; etc/runtime.api.md is its API Extractor report. The
// throttler client is @sluice/client's, the jobs and their input throttling are internal.
export {
  COMPUTATION_BRAND,
  defineComputation,
  isComputation,
  type Batch,
  type Computation,
  type ComputationDefinition,
  type Logger,
  type Message,
  type OutputMessage,
  type RuntimeContext,
} from "./computation.ts";
export { consoleLogger } from "./console-logger.ts";
export { runGenerators, type GenerateMessage } from "./generator.ts";
export { recordByteSize } from "./io/record-byte-size.ts";
export { decodeValue, encodeValue } from "./io/stream-codec.ts";
export type { ComputationStatsView } from "./job/computation-stats.ts";
export { ITERATION_PARTS, PART_BUCKETS_SECONDS, type IterationPart, type IterationPartView } from "./job/iteration-parts.ts";
export type { ThrottlerMetricsView } from "./job/throttler-metrics-view.ts";
export { MemoryIoFactory } from "./memory/memory-io-factory.ts";
export { MemoryLog } from "./memory/memory-log.ts";
export { MemorySink } from "./memory/memory-sink.ts";
export { MemorySource } from "./memory/memory-source.ts";
export type { IoFactory } from "./ports/io-factory.ts";
export type { Sink, SinkRecord } from "./ports/sink.ts";
export type {
  BatchContext,
  BatchHandler,
  BatchTransaction,
  NativeRecords,
  PartitionRef,
  RecordReader,
  Source,
  SourceBatch,
  SourceListener,
  SourceRecord,
} from "./ports/source.ts";
export { NO_RECORD_HEADERS, SOURCE_RECORD_READER } from "./io/source-record-reader.ts";
export { Worker, type WorkerOptions } from "./worker.ts";
export { AlignedPartition, type AlignmentAnswer, type AlignmentSettings } from "./alignment/aligned-partition.ts";
export {
  WatermarkAlignment,
  WATERMARK_ALIGNMENT_DEFAULTS,
  type AlignmentMetricsView,
  type WatermarkAlignmentOptions,
} from "./alignment/watermark-alignment.ts";
export { defaultWorkerId } from "./worker-id.ts";
