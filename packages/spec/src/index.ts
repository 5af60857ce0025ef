export { parseDuration, formatDuration, duration, durationSchema, DURATION_PATTERN } from "./duration.ts";
export {
  THROTTLER_DEFAULTS,
  RETRYING_CHANNEL_DEFAULTS,
  THROTTLER_CLASS_DEFAULTS,
  STREAM_DEFAULTS,
  COMPUTATION_DEFAULTS,
  KAFKA_DEFAULTS,
  CONTROLLER_DEFAULTS,
  ADAPTIVE_DEFAULTS,
  WATERMARK_ALIGNMENT_DEFAULTS,
  KEYED_DEFAULTS,
} from "./defaults.ts";
export {
  keyedSpecSchema,
  keyOverrideSchema,
  keyOverrideOf,
  keyThrottlerSpec,
  keyProblem,
  MAX_KEY_BYTES,
  KEY_OVERRIDE_FIELDS,
  type KeyedSpec,
  type KeyOverride,
} from "./keyed-spec.ts";
export {
  watermarkAlignmentSpecSchema,
  type WatermarkAlignmentSpec,
  type WatermarkAlignmentSpecInput,
} from "./watermark-alignment-spec.ts";
export { adaptiveSpecSchema, initialLimitOf, type AdaptiveSpec, type AdaptiveSpecInput } from "./adaptive-spec.ts";
export {
  throttlerSpecSchema,
  THROTTLER_KINDS,
  type ThrottlerKind,
  throttlerClassSpecSchema,
  throttlerClassIdSchema,
  retryingChannelSpecSchema,
  DEFAULT_CLASS_ID,
  MIN_CLASS_WEIGHT,
  MAX_CLASS_WEIGHT,
  type ThrottlerSpec,
  type ThrottlerSpecInput,
  type ThrottlerClassSpec,
  type RetryingChannelSpec,
} from "./throttler-spec.ts";
export {
  dynamicSpecSchema,
  computationDynamicSpecSchema,
  METERS,
  type Meter,
  type DynamicSpec,
  type DynamicSpecInput,
  type ComputationDynamicSpec,
} from "./dynamic-spec.ts";
export {
  pipelineSpecSchema,
  streamSpecSchema,
  computationSpecSchema,
  generatorSpecSchema,
  kafkaSpecSchema,
  controllerSpecSchema,
  controllerAddressesOf,
  controllerTlsSpecSchema,
  STREAM_FORMATS,
  DELIVERY_MODES,
  PIPELINE_NAME_PATTERN,
  MAX_ROWS_PER_BATCH_LIMIT,
  MAX_OPEN_CALLS_PER_STREAM_LIMIT,
  type PipelineSpec,
  type PipelineSpecInput,
  type StreamSpec,
  type StreamFormat,
  type DeliveryMode,
  type GeneratorSpec,
  type ComputationSpec,
  type KafkaSpec,
  type ControllerSpec,
  type ControllerTlsSpec,
} from "./pipeline-spec.ts";
export {
  validatePipelineSpec,
  validateDynamicSpec,
  formatIssues,
  sortIssues,
  type SpecIssue,
  type ValidationResult,
  type DynamicSpecValidationOptions,
} from "./validate.ts";
export { formatIssuePath, compareIssuePaths, ROOT_PATH, type IssuePathSegment } from "./issue-path.ts";
export { extractDynamicSpec } from "./extract-dynamic-spec.ts";
export { MAX_ID_LENGTH, quoteId } from "./id-length.ts";
export { parseJson, firstSyntaxErrorOffset, lineAndColumn, type JsonParseResult } from "./parse-json.ts";
export { pipelineJsonSchema, dynamicSpecJsonSchema } from "./json-schema.ts";
export { effectiveLimit, type LimitFields } from "./effective-limit.ts";
