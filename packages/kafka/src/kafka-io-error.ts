/**
 * What the Kafka adapter refuses or fails at, with a stable `code` to branch on. The message
 * names the computation, group, stream, topic, partition and offsets involved.
 */
export const KAFKA_IO_ERROR_CODES = {
  /** The pipeline spec has no `kafka` section, or names a stream or computation that is not declared. */
  KAFKA_SPEC_INVALID: { retriable: false },
  /** The partition was taken away (rebalance, expulsion) or the source stopped; the next owner resumes from the last commit. */
  PARTITION_REVOKED: { retriable: false },
  /** The source or sink was closed. */
  CLOSED: { retriable: false },
  /** The consumer could not connect, subscribe or join its group in time. */
  SOURCE_START_FAILED: { retriable: true },
  /** kafkajs gave up on the consumer and will not restart it. */
  CONSUMER_CRASHED: { retriable: true },
  COMMIT_FAILED: { retriable: true },
  /** A BatchHandler threw (it should not: the runtime's job turns failures into rewinds); the partition was rewound. */
  HANDLER_FAILED: { retriable: true },
  /** A SourceListener callback threw; kafkajs was shielded from it. */
  LISTENER_FAILED: { retriable: false },
  SEND_FAILED: { retriable: true },
  /** delivery "exactly_once": claiming a partition's transactional id, or a transaction, failed; the batch is redone from the last committed transaction. */
  TRANSACTION_FAILED: { retriable: true },
  /** A record asks for a partition the topic does not have, or is otherwise malformed. */
  INVALID_RECORD: { retriable: false },
  TOPIC_SETUP_FAILED: { retriable: true },
} as const satisfies Record<string, { retriable: boolean }>;

export type KafkaIoErrorCode = keyof typeof KAFKA_IO_ERROR_CODES;

export class KafkaIoError extends Error {
  override readonly name = "KafkaIoError";
  readonly code: KafkaIoErrorCode;
  readonly retriable: boolean;
  /** The figures behind the message (topic, partition, offsets, group), for logs and tests. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: KafkaIoErrorCode, text: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(`${code}: ${text}`, options);
    this.code = code;
    this.retriable = KAFKA_IO_ERROR_CODES[code].retriable;
    this.details = details;
  }

  /** The message without its `CODE: ` prefix. */
  get text(): string {
    return this.message.slice(this.code.length + 2);
  }
}

export function isKafkaIoError(error: unknown, code?: KafkaIoErrorCode): error is KafkaIoError {
  return error instanceof KafkaIoError && (code === undefined || error.code === code);
}

/**
 * The message of any thrown value, with the messages of its causes (kafkajs wraps broker errors)
 * and of the errors it aggregates (one per topic in CreateTopics, for example).
 */
export function describeError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 4; depth++) {
    const message = current instanceof Error ? current.message : String(current);
    if (!parts.includes(message)) parts.push(message);
    const inner = aggregated(current);
    if (inner.length > 0) parts.push(`[${inner.join("; ")}]`);
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(": ");
}

function aggregated(error: unknown): string[] {
  const errors: unknown = error instanceof Error ? (error as Error & { errors?: unknown }).errors : undefined;
  if (!Array.isArray(errors)) return [];
  return errors.map((inner: unknown) => {
    const topic: unknown = inner instanceof Error ? (inner as Error & { topic?: unknown }).topic : undefined;
    const message = inner instanceof Error ? inner.message : String(inner);
    return typeof topic === "string" ? `topic "${topic}": ${message}` : message;
  });
}
