export { KafkaIoFactory, type KafkaIoFactoryOptions } from "./kafka-io-factory.ts";
export { KafkaSource, type KafkaSourceInit, type KafkaSourceOptions } from "./kafka-source.ts";
export { KafkaSink, type KafkaSinkInit, type KafkaSinkOptions } from "./kafka-sink.ts";
export { ensureTopics, type EnsureTopicsOptions, type EnsureTopicsResult, type TopicState } from "./ensure-topics.ts";
export { createKafkaClient, type KafkaClientOptions, type KafkaLogEntry, type KafkaLogLevel } from "./kafka-client.ts";
export { KafkaIoError, isKafkaIoError, KAFKA_IO_ERROR_CODES, type KafkaIoErrorCode } from "./kafka-io-error.ts";
export { fromKafkaHeaders, toKafkaHeaders } from "./kafka-headers.ts";
export { StreamTopics, type StreamTopic } from "./stream-topics.ts";
export { KAFKA_CLIENT_DEFAULTS, KAFKA_SOURCE_DEFAULTS, KAFKA_SINK_DEFAULTS, ENSURE_TOPICS_DEFAULTS } from "./defaults.ts";
