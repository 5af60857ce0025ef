// Every default of the Kafka adapter, in one place. Timeouts are in milliseconds.

/** The kafkajs client shared by a factory's sources, sinks and admin. */
export const KAFKA_CLIENT_DEFAULTS = Object.freeze({
  /**
   * kafkajs logs routine rebalances at WARN and problems at ERROR; INFO and DEBUG are a firehose
   * (every pause, resume and join), so nothing more verbose than WARN by default.
   */
  logLevel: "warn",
  connectionTimeoutMs: 3_000,
  requestTimeoutMs: 30_000,
  /** kafkajs retries a failed request this many times with exponential backoff before giving up. */
  retries: 8,
  initialRetryTimeMs: 300,
  maxRetryTimeMs: 10_000,
} as const);

/** KafkaSource: one consumer group per computation. */
export const KAFKA_SOURCE_DEFAULTS = Object.freeze({
  /**
   * A member that sends no heartbeat for this long is expelled. Heartbeats come from the kafkajs
   * fetch loop, which never waits for a handler (see KafkaSource), so a long throttled iteration
   * does not count against it.
   */
  sessionTimeoutMs: 30_000,
  heartbeatIntervalMs: 3_000,
  /** How long the coordinator waits for every member to rejoin during a rebalance. */
  rebalanceTimeoutMs: 30_000,
  /**
   * delivery "exactly_once": the broker aborts a transaction left open this long (its producer
   * died). A new owner does not wait for it: claiming the partition aborts it at once.
   */
  transactionTimeoutMs: 60_000,
  /**
   * Longest broker-side wait of one fetch (kafkajs default 5 s). It bounds how soon a partition
   * whose handler just finished is fetched again while the others are idle, and how often the
   * fetch loop heartbeats when every partition is busy.
   */
  maxWaitTimeMs: 500,
  /** Largest fetch per partition; a larger first record batch is still returned whole. */
  maxBytesPerPartition: 1_048_576,
  /**
   * Batches fetched ahead per partition while its handler runs. 1 hides the fetch round trip
   * without buffering much; the partition is paused beyond that.
   */
  prefetchBatchesPerPartition: 1,
  /**
   * Shortest time between two offset commits of one consumer. Jobs ask for a commit after every
   * iteration; the asks in between are merged into the next commit (newest offset per partition).
   * A crash repeats at most about this much work more than a commit per iteration would.
   */
  commitIntervalMs: 50,
  /** A commit the broker refuses because the group is rebalancing is retried after the join, this many attempts in all. */
  maxCommitAttempts: 3,
  /** start() fails when the consumer has not joined its group by then. */
  joinTimeoutMs: 60_000,
} as const);

/** KafkaSink: one producer per sink. */
export const KAFKA_SINK_DEFAULTS = Object.freeze({
  /**
   * One send() is split into produce requests of at most this many record bytes (recordByteSize),
   * sent one after another, so that a large emit stays under the broker's message.max.bytes
   * (1 MiB by default) for any one partition.
   */
  maxRequestBytes: 524_288,
  /** How long the broker may wait for in-sync replicas before failing a produce (acks = all). */
  ackTimeoutMs: 30_000,
  /**
   * kafkajs's idempotent mode needs maxInFlightRequests = 1, which serialises every send of the
   * worker, and is marked experimental; duplicates from retries are within at-least-once anyway.
   */
  idempotent: false,
} as const);

/** KafkaIoFactory.ensureTopics. */
export const ENSURE_TOPICS_DEFAULTS = Object.freeze({
  /** The broker's `default.replication.factor` is asked for when none is given; this is the fallback. */
  fallbackReplicationFactor: 1,
  createTimeoutMs: 30_000,
} as const);

/** RestartingConsumer: the controller election's and state reader's consumers, started again when kafkajs gives up on one. */
export const CONSUMER_RESTART_DEFAULTS = Object.freeze({
  /** The wait before a new consumer; it doubles while the new ones die before joining their group. */
  initialDelayMs: 500,
  /** The longest wait: a broker back after any outage is tried again within this. */
  maxDelayMs: 5_000,
  /** A kafkajs disconnect waits for its fetch loop and a LeaveGroup; a broker that is down can hold both. */
  disconnectTimeoutMs: 10_000,
  /** kafkajs reports a crash right after the stop it causes; a stop with no report this long after is a death. */
  stopGraceMs: 10_000,
} as const);
